#!/usr/bin/env bash
# Pushes an image built by build.sh to ECR in the caller's account as
# ACCOUNT.dkr.ecr.REGION.amazonaws.com/REPOSITORY:FULL-DEVICE and :SHORT-DEVICE.
set -euo pipefail
USAGE="$(basename "$0") [--version X.Y[.Z]] [--arch cpu|gpu|eia] [--region REGION] [--repository NAME]"
# shellcheck source=scripts/shared.sh
source "$(dirname "$0")/shared.sh"

main() {
  parse_std_args "$@"
  require_region
  local account registry
  account=$(aws_account) || die "cannot find the AWS account (aws sts get-caller-identity)"
  registry=$(registry_of "$account")
  ecr_login "$registry"
  local tag
  for tag in "$tag_full" "$tag_short"; do
    docker tag "$repository:$tag_full" "$registry/$repository:$tag"
  done
  for tag in "$tag_full" "$tag_short"; do
    docker push "$registry/$repository:$tag"
  done
  docker logout "$registry"
}

main "$@"
