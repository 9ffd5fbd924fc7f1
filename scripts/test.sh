#!/usr/bin/env bash
# Runs every test and lint check, as CI does. Extra arguments go to tox
# (e.g. `scripts/test.sh -e py -- test/unit`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
exec .venv/bin/tox run "$@"
