#!/usr/bin/env bash
# Runs a serving image built by build.sh in the background, serving the example models
# (test/resources/models, or --model-dir) on localhost:8080 (or --port), and passes every
# SAGEMAKER_* variable of the caller's environment into the container. --ca-bundle FILE
# mounts FILE read-only and names it in PIP_CERT, for a code/requirements.txt installed at
# start-up behind a TLS-intercepting proxy. --serverless MEMORY runs it as SageMaker Serverless
# Inference does: a read-only root filesystem with only /tmp writable, and MEMORY (e.g. 2g).
# --cpus N gives the container a CPU quota of N CPUs (as a SageMaker inference component does).
# --local runs the same stack on this host instead (scripts/local.sh start).
set -euo pipefail
USAGE="$(basename "$0") [--local] [--version X.Y[.Z]] [--arch cpu|gpu|eia] [--repository NAME] [--port PORT] [--model-dir DIR] [--ca-bundle FILE] [--serverless MEMORY] [--cpus N]"
# shellcheck source=scripts/shared.sh
source "$(dirname "$0")/shared.sh"

CONTAINER_CA_BUNDLE=/etc/pip-ca-bundle.crt

# SAGEMAKER_* variables to pass: the caller's, plus the port range SageMaker gives.
sagemaker_env_args() {
  local name
  if [[ -z ${SAGEMAKER_SAFE_PORT_RANGE:-} ]]; then
    echo "--env=SAGEMAKER_SAFE_PORT_RANGE=9000-9999"
  fi
  for name in $(compgen -e | grep '^SAGEMAKER_' | sort); do
    echo "--env=$name"
  done
}

main() {
  run_locally_if_asked start "$@"
  local port=8080 model_dir="$REPO_ROOT/test/resources/models" std_args=() ca_args=()
  local serverless_args=() cpu_args=()
  while [[ $# -gt 0 ]]; do
    case $1 in
      --port | --model-dir | --ca-bundle | --serverless | --cpus)
        [[ $# -ge 2 && -n $2 ]] || usage_error "$1 needs a value"
        case $1 in
          --port) port=$2 ;;
          --model-dir) model_dir=$2 ;;
          --serverless) serverless_args=(--read-only --tmpfs /tmp --memory "$2") ;;
          --cpus)
            [[ $2 =~ ^[0-9]*\.?[0-9]+$ ]] || usage_error "invalid CPU count '$2'"
            cpu_args=(--cpus "$2")
            ;;
          --ca-bundle)
            ca_args=(
              --volume "$(resolve_ca_bundle "$2"):$CONTAINER_CA_BUNDLE:ro"
              --env "PIP_CERT=$CONTAINER_CA_BUNDLE"
            )
            ;;
        esac
        shift 2
        ;;
      *)
        std_args+=("$1")
        shift
        ;;
    esac
  done
  [[ $port =~ ^[0-9]+$ && $port -ge 1 && $port -le 65535 ]] || usage_error "invalid port '$port'"
  [[ -d $model_dir ]] || usage_error "no such model directory '$model_dir'"
  parse_std_args "${std_args[@]}"
  # podman's --read-only also makes /run and /var/tmp writable unless told otherwise.
  if [[ ${#serverless_args[@]} -gt 0 ]] && engine_is_podman; then
    serverless_args+=(--read-only-tmpfs=false)
  fi

  local model_mount=/opt/ml/model gpu_args=() env_args=()
  if [[ ${SAGEMAKER_MULTI_MODEL:-false} == true ]]; then model_mount=/opt/ml/models; fi
  if [[ $arch == gpu ]]; then gpu_args=(--gpus all); fi
  mapfile -t env_args < <(sagemaker_env_args)
  docker run --detach --name "$container_name" \
    "${gpu_args[@]}" \
    --volume "$(cd "$model_dir" && pwd):$model_mount:ro" \
    --publish "$port:${SAGEMAKER_BIND_TO_PORT:-8080}" \
    "${env_args[@]}" \
    "${ca_args[@]}" \
    "${serverless_args[@]}" \
    "${cpu_args[@]}" \
    "$repository:$tag_full" serve
  echo "started $container_name ($repository:$tag_full) on http://localhost:$port" \
    "(logs: docker logs -f $container_name)"
}

main "$@"
