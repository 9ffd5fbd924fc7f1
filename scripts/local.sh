#!/usr/bin/env bash
# Runs the serving stack on this host (no Docker): nginx, the Python service and model
# servers, supervised by `sagemaker-tfs serve` from .venv.
#
#   scripts/local.sh start [--model-dir DIR] [--port N] [--work-dir DIR]
#   scripts/local.sh stop  [--work-dir DIR]
#
# `start` serves test/resources/models (the bundled half_plus_three) on port 8080 by
# default, in the background, and returns once /ping answers 200. The supervisor's log is
# WORK_DIR/serve.log. Environment variables of docs (SAGEMAKER_*) are passed through.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK_DIR="${SAGEMAKER_TFS_WORK_DIR:-/tmp/sagemaker-tfs-local}"
MODEL_DIR="$ROOT/test/resources/models"
PORT="${SAGEMAKER_BIND_TO_PORT:-8080}"
START_TIMEOUT_SECONDS="${SAGEMAKER_TFS_START_TIMEOUT:-300}"
STOP_TIMEOUT_SECONDS=90

usage() {
  echo "usage: $0 start [--model-dir DIR] [--port N] [--work-dir DIR] | stop [--work-dir DIR]" >&2
  exit 2
}

fail() {
  echo "local.sh: $*" >&2
  exit 1
}

parse_options() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --model-dir) [ $# -ge 2 ] || usage; MODEL_DIR="$2"; shift 2 ;;
      --port) [ $# -ge 2 ] || usage; PORT="$2"; shift 2 ;;
      --work-dir) [ $# -ge 2 ] || usage; WORK_DIR="$2"; shift 2 ;;
      *) usage ;;
    esac
  done
}

pid_file() {
  echo "$WORK_DIR/serve.pid"
}

running_pid() {
  local pid
  [ -f "$(pid_file)" ] || return 1
  pid="$(cat "$(pid_file)")"
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

ensure_virtualenv() {
  if [ ! -x "$ROOT/.venv/bin/sagemaker-tfs" ]; then
    echo "local.sh: .venv missing, running scripts/bootstrap.sh"
    "$ROOT/scripts/bootstrap.sh"
  fi
}

wait_for_ping() {
  local pid="$1" deadline=$((SECONDS + START_TIMEOUT_SECONDS))
  until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/ping" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$WORK_DIR/serve.log" >&2 || true
      fail "the stack exited during start-up (log: $WORK_DIR/serve.log)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "/ping did not answer 200 within ${START_TIMEOUT_SECONDS}s (log: $WORK_DIR/serve.log)"
    fi
    sleep 0.5
  done
}

start() {
  parse_options "$@"
  local pid
  if pid="$(running_pid)"; then
    fail "already running (pid $pid); run '$0 stop' first"
  fi
  [ -d "$MODEL_DIR" ] || fail "model directory $MODEL_DIR does not exist"
  ensure_virtualenv
  mkdir -p "$WORK_DIR"
  nohup "$ROOT/.venv/bin/sagemaker-tfs" serve \
    --model-dir "$(cd "$MODEL_DIR" && pwd)" --work-dir "$WORK_DIR" --port "$PORT" \
    >"$WORK_DIR/serve.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$(pid_file)"
  wait_for_ping "$pid"
  echo "serving $MODEL_DIR on http://localhost:$PORT (pid $pid, log $WORK_DIR/serve.log)"
}

stop() {
  parse_options "$@"
  local pid deadline
  if ! pid="$(running_pid)"; then
    rm -f "$(pid_file)"
    echo "not running"
    return 0
  fi
  kill -TERM "$pid"
  deadline=$((SECONDS + STOP_TIMEOUT_SECONDS))
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "pid $pid did not stop within ${STOP_TIMEOUT_SECONDS}s"
    fi
    sleep 0.2
  done
  rm -f "$(pid_file)"
  echo "stopped (pid $pid)"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) usage ;;
esac
