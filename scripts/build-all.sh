#!/usr/bin/env bash
# Builds cpu and gpu images for every version in docker/versions.txt (newest first).
# eia is left out: AWS published no Elastic Inference model server for these versions;
# build it explicitly with build.sh --arch eia when one exists.
# Extra arguments (--region, --repository) go to every build.sh call.
set -euo pipefail
USAGE="$(basename "$0") [--region REGION] [--repository NAME]"
# shellcheck source=scripts/shared.sh
source "$(dirname "$0")/shared.sh"

for_every_image build.sh "$@"
