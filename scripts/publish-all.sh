#!/usr/bin/env bash
# Publishes cpu and gpu images for every version in docker/versions.txt (newest first).
# eia is left out: AWS published no Elastic Inference model server for these versions;
# publish it explicitly with publish.sh --arch eia.
# Extra arguments (--region, --repository) go to every publish.sh call.
set -euo pipefail
USAGE="$(basename "$0") [--region REGION] [--repository NAME]"
# shellcheck source=scripts/shared.sh
source "$(dirname "$0")/shared.sh"

for_every_image publish.sh "$@"
