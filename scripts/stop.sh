#!/usr/bin/env bash
# Stops and removes the container start.sh started for the same --version and --arch.
# --local stops the stack running on this host instead (scripts/local.sh stop).
set -euo pipefail
USAGE="$(basename "$0") [--local] [--version X.Y[.Z]] [--arch cpu|gpu|eia] [--repository NAME]"
# shellcheck source=scripts/shared.sh
source "$(dirname "$0")/shared.sh"

main() {
  run_locally_if_asked stop "$@"
  parse_std_args "$@"
  docker rm --force "$container_name"
}

main "$@"
