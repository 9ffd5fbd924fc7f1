#!/usr/bin/env bash
# Stops and removes the container start.sh started for the same --version and --arch.
# The stop is graceful: SIGTERM reaches `serve` (PID 1), which lets in-flight requests finish;
# the engine kills the container only after STOP_TIMEOUT_SECONDS. Exits 1 (after printing the
# end of the container's log) when the container did not exit 0.
# --local stops the stack running on this host instead (scripts/local.sh stop).
set -euo pipefail
USAGE="$(basename "$0") [--local] [--version X.Y[.Z]] [--arch cpu|gpu|eia] [--repository NAME]"
# shellcheck source=scripts/shared.sh
source "$(dirname "$0")/shared.sh"

STOP_TIMEOUT_SECONDS=30

main() {
  run_locally_if_asked stop "$@"
  parse_std_args "$@"
  docker container inspect "$container_name" >/dev/null 2>&1 \
    || die "no container named $container_name (start it with start.sh)"
  docker stop -t "$STOP_TIMEOUT_SECONDS" "$container_name" >/dev/null
  local code
  code=$(docker container inspect --format '{{.State.ExitCode}}' "$container_name")
  if [[ $code != 0 ]]; then
    docker logs --tail 20 "$container_name" >&2 || true
  fi
  docker rm "$container_name" >/dev/null
  [[ $code == 0 ]] || die "$container_name exited with code $code (its last log lines are above)"
  echo "stopped $container_name (exit code 0)"
}

main "$@"
