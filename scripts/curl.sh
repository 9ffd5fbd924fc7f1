#!/usr/bin/env bash
# Example requests against a running container (start.sh) or the stack on this host
# (start.sh --local): the half_plus_three example model answers x / 2 + 3.
# Every example runs by default except multi-model, which needs SAGEMAKER_MULTI_MODEL=true.
# Exits 1 when any request gets a non-2xx answer.
set -euo pipefail
USAGE="$(basename "$0") [--host HOST] [--port PORT] [--model NAME] [--models-root DIR] [EXAMPLE...]
examples: ping json jsonlines csv accept-jsonlines custom-attributes npy multi-model"
DEFAULT_EXAMPLES=(ping json jsonlines csv accept-jsonlines custom-attributes npy)
ALL_EXAMPLES=("${DEFAULT_EXAMPLES[@]}" multi-model)

usage_error() {
  echo "$(basename "$0"): $1" >&2
  echo "usage: $USAGE" >&2
  exit 2
}

host=localhost
port=8080
model=half_plus_three
models_root=/opt/ml/models
failures=0

# request TITLE CURL-ARGS...: prints the answer and its status; counts non-2xx answers.
request() {
  local title=$1 body status
  shift
  body=$(mktemp)
  echo "== $title"
  status=$(curl --silent --show-error --output "$body" --write-out '%{http_code}' "$@") \
    || status=000
  cat "$body"
  rm -f "$body"
  echo
  echo "-- HTTP $status"
  [[ $status =~ ^2[0-9][0-9]$ ]] || failures=$((failures + 1))
}

url() {
  echo "http://$host:$port$1"
}

invoke() {
  local title=$1 content_type=$2
  shift 2
  request "$title" -X POST -H "Content-Type: $content_type" "$@" "$(url /invocations)"
}

# A float32 vector [1, 2, 5] in NumPy's .npy format (version 1.0, 128-byte header).
npy_body() {
  printf '\x93NUMPY\x01\x00\x76\x00'
  printf '%-117s\n' "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"
  printf '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\xa0\x40'
}

example() {
  case $1 in
    ping) request "GET /ping" "$(url /ping)" ;;
    json) invoke "JSON instances" application/json --data '{"instances": [1.0, 2.0, 5.0]}' ;;
    jsonlines)
      invoke "JSON lines, one instance a line" application/jsonlines \
        --data-binary $'[1.0, 2.0]\n[5.0, 6.0]\n'
      ;;
    csv) invoke "CSV, one column" text/csv --data-binary $'1.0\n2.0\n5.0\n' ;;
    accept-jsonlines)
      invoke "JSON in, JSON lines out" application/json -H "Accept: application/jsonlines" \
        --data '{"instances": [1.0, 2.0, 5.0]}'
      ;;
    custom-attributes)
      invoke "model and method from custom attributes" application/json \
        -H "X-Amzn-SageMaker-Custom-Attributes: tfs-model-name=$model,tfs-method=predict" \
        --data '{"instances": [1.0, 2.0, 5.0]}'
      ;;
    npy) invoke "NumPy .npy" application/x-npy --data-binary @<(npy_body) ;;
    multi-model) multi_model_examples ;;
    *) usage_error "unknown example '$1'" ;;
  esac
}

multi_model_examples() {
  request "POST /models (load $model)" -X POST -H "Content-Type: application/json" \
    --data "{\"model_name\": \"$model\", \"url\": \"$models_root/$model\"}" "$(url /models)"
  request "GET /models" "$(url /models)"
  request "POST /models/$model/invoke" -X POST -H "Content-Type: application/json" \
    --data '{"instances": [1.0, 2.0, 5.0]}' "$(url "/models/$model/invoke")"
  request "DELETE /models/$model" -X DELETE "$(url "/models/$model")"
}

main() {
  local examples=()
  while [[ $# -gt 0 ]]; do
    case $1 in
      --host | --port | --model | --models-root)
        [[ $# -ge 2 && -n $2 ]] || usage_error "$1 needs a value"
        case $1 in
          --host) host=$2 ;;
          --port) port=$2 ;;
          --model) model=$2 ;;
          --models-root) models_root=$2 ;;
        esac
        shift 2
        ;;
      -h | --help)
        echo "usage: $USAGE"
        exit 0
        ;;
      -*) usage_error "unknown argument '$1'" ;;
      *)
        [[ " ${ALL_EXAMPLES[*]} " == *" $1 "* ]] || usage_error "unknown example '$1'"
        examples+=("$1")
        shift
        ;;
    esac
  done
  [[ $port =~ ^[0-9]+$ ]] || usage_error "invalid port '$port'"
  [[ ${#examples[@]} -gt 0 ]] || examples=("${DEFAULT_EXAMPLES[@]}")
  local name
  for name in "${examples[@]}"; do
    example "$name"
  done
  if [[ $failures -gt 0 ]]; then
    echo "$failures request(s) failed" >&2
    exit 1
  fi
}

main "$@"
