#!/usr/bin/env bash
# Stops and removes the container start.sh started for the same --version and --arch.
# --local stops the stack running on this host instead (scripts/local.sh stop).
set -euo pipefail
USAGE="$(basename "$0") [--local] [--version X.Y[.Z]] [--arch cpu|gpu|eia] [--repository NAME]"
# shellcheck source=scripts/shared.sh
source "$(dirname "$0")/shared.sh"

main() {
  local std_args=()
  while [[ $# -gt 0 ]]; do
    if [[ $1 == --local ]]; then
      shift
      [[ -x "$REPO_ROOT/scripts/local.sh" ]] || die "scripts/local.sh is missing"
      exec "$REPO_ROOT/scripts/local.sh" stop "$@"
    fi
    std_args+=("$1")
    shift
  done
  parse_std_args "${std_args[@]}"
  docker rm --force "$container_name"
}

main "$@"
