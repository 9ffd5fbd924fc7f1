#!/usr/bin/env bash
# Runs every test and lint check, as CI does: tox's environments one after the other, with
# the disk space left before each.
# Extra arguments go to tox as they are (e.g. `scripts/test.sh -e py -- test/unit`).
# With CI=true, the SDK environment's virtualenvs are removed once it has run, so that the
# image build after it has their 3.7 GB too.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
if [ $# -gt 0 ]; then
  exec .venv/bin/tox run "$@"
fi

free_disk() {
  df -h --output=avail . | tail -n 1 | tr -d ' '
}

failed=()
for env in lint py sdk image; do
  echo "test.sh: tox -e $env ($(free_disk) of disk free)"
  .venv/bin/tox run -e "$env" || failed+=("$env")
  if [ "$env" = sdk ] && [ "${CI:-}" = true ]; then
    rm -rf .tox/sdk "${SAGEMAKER_TFS_SDK_CACHE:-$HOME/.cache/sagemaker-tfs-sdk}"
  fi
done
echo "test.sh: done ($(free_disk) of disk free)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "test.sh: failed: ${failed[*]}" >&2
  exit 1
fi
echo "test.sh: lint, py, sdk and image passed"
