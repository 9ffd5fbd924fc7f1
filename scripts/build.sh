#!/usr/bin/env bash
# Builds one serving image, tagged REPOSITORY:FULL-DEVICE and REPOSITORY:SHORT-DEVICE.
# With Docker and AWS credentials, the published image in ECR is the layer cache
# (--cache-from); without them, or with podman as `docker` (it cannot read Docker's inline
# cache), the build goes on with local layers only. --ca-bundle FILE lets pip inside the build
# trust a TLS-intercepting proxy: it is passed as the build secret pip-ca, never stored in a
# layer.
# --arch eia first fetches AWS's Elastic Inference model server from the amazonei-tensorflow
# S3 bucket into docker/build_artifacts/.
set -euo pipefail
USAGE="$(basename "$0") [--version X.Y[.Z]] [--arch cpu|gpu|eia] [--region REGION] [--repository NAME] [--ca-bundle FILE]"
# shellcheck source=scripts/shared.sh
source "$(dirname "$0")/shared.sh"

# Downloads the newest EI build for short_version and installs its binary at EI_ARTIFACT.
fetch_ei_binary() {
  local prefix="s3://$EI_BUCKET/tensorflow-serving/v$short_version/ubuntu/latest/"
  local archive workdir binary
  archive=$(aws s3 ls "$prefix" 2>/dev/null | awk 'NF >= 4 { print $4; exit }' || true)
  if [[ -z $archive ]]; then
    die "no Elastic Inference model server for TF Serving $short_version in $prefix" \
      "(AWS published EI builds for 1.11-1.15 and 2.0-2.3 only; Elastic Inference is retired)"
  fi
  workdir=$(mktemp -d)
  aws s3 cp "$prefix$archive" "$workdir/$archive" >/dev/null
  tar -xf "$workdir/$archive" -C "$workdir"
  binary=$(find "$workdir" -type f -name "$EI_BINARY" | head -n 1)
  [[ -n $binary ]] || { rm -rf "$workdir"; die "$prefix$archive holds no $EI_BINARY"; }
  mkdir -p "$(dirname "$EI_ARTIFACT")"
  install -m 0755 "$binary" "$EI_ARTIFACT"
  rm -rf "$workdir"
}

remove_ei_binary() {
  rm -f "$EI_ARTIFACT"
}

# Prints the published image to use as cache after logging in to its registry; prints
# nothing (and warns) when there is no AWS account or the login fails.
cache_image() {
  local account registry
  if [[ -z $region ]]; then
    warn "no AWS region (--region, AWS_REGION or aws configure): building without --cache-from"
    return 0
  fi
  if ! account=$(aws_account 2>/dev/null) || [[ -z $account ]]; then
    warn "no AWS account (aws sts get-caller-identity failed): building without --cache-from"
    return 0
  fi
  registry=$(registry_of "$account")
  if ! ecr_login "$registry" >/dev/null; then
    warn "ECR login to $registry failed: building without --cache-from"
    return 0
  fi
  echo "$registry/$repository:$tag_full"
}

# set_engine_args ENGINE CA_BUNDLE sets engine_args: the registry cache (Docker; podman needs
# no AWS region or login) and the CA bundle as the build secret pip-ca (both engines).
set_engine_args() {
  local engine=$1 ca_bundle=$2 cache
  engine_args=()
  if [[ $engine == podman ]]; then
    warn "podman: building without --cache-from (it cannot read Docker's inline cache)"
  else
    resolve_region
    cache=$(cache_image)
    [[ -z $cache ]] || engine_args=(--cache-from "$cache")
    engine_args+=(--build-arg BUILDKIT_INLINE_CACHE=1)
  fi
  [[ -z $ca_bundle ]] || engine_args+=(--secret "id=pip-ca,src=$ca_bundle")
}

main() {
  local std_args=() ca_bundle=""
  while [[ $# -gt 0 ]]; do
    case $1 in
      --ca-bundle)
        [[ $# -ge 2 && -n $2 ]] || usage_error "$1 needs a value"
        ca_bundle=$(resolve_ca_bundle "$2")
        shift 2
        ;;
      *)
        std_args+=("$1")
        shift
        ;;
    esac
  done
  parse_std_args "${std_args[@]}"
  local engine=docker
  if engine_is_podman; then engine=podman; fi
  if [[ $arch == eia ]]; then
    fetch_ei_binary
    trap remove_ei_binary EXIT
  fi
  set_engine_args "$engine" "$ca_bundle"
  echo "building $repository:$tag_full from $dockerfile"
  cd "$REPO_ROOT"
  docker build \
    "${engine_args[@]}" \
    --file "$dockerfile" \
    --tag "$repository:$tag_full" \
    --tag "$repository:$tag_short" \
    .
}

main "$@"
