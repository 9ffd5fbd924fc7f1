# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables set here are read by the scripts that source it
# Helpers shared by build.sh, build-all.sh, publish.sh, publish-all.sh, start.sh and stop.sh:
# the version list, argument parsing, image names, AWS account/region and ECR login.
# Source it (the callers set -euo pipefail); it defines functions and constants only.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VERSIONS_FILE="$REPO_ROOT/docker/versions.txt"
ARCHES=(cpu gpu eia)
DEFAULT_REPOSITORY=sagemaker-tensorflow-serving
EI_BUCKET=amazonei-tensorflow
EI_BINARY=amazonei_tensorflow_model_server
EI_ARTIFACT="$REPO_ROOT/docker/build_artifacts/$EI_BINARY"

# Each script sets its own USAGE line before sourcing this file.
USAGE=${USAGE:-"$(basename "$0") [--version X.Y[.Z]] [--arch cpu|gpu|eia] [--region REGION]"}

usage_error() {
  echo "$(basename "$0"): $1" >&2
  echo "usage: $USAGE" >&2
  exit 2
}

die() {
  echo "$(basename "$0"): error: $*" >&2
  exit 1
}

warn() {
  echo "$(basename "$0"): warning: $1" >&2
}

# Full versions (e.g. 2.21.0) from docker/versions.txt, newest first.
known_versions() {
  awk '{ sub(/#.*/, "") } NF { print $1 }' "$VERSIONS_FILE"
}

# for_every_image SCRIPT ARGS...: scripts/SCRIPT --version V --arch A ARGS for every version in
# docker/versions.txt (newest first) and the cpu and gpu arches (build-all.sh, publish-all.sh).
for_every_image() {
  local script=$1 version arch
  shift
  for version in $(known_versions); do
    for arch in cpu gpu; do
      "$REPO_ROOT/scripts/$script" --version "$version" --arch "$arch" "$@"
    done
  done
}

short_of() {
  echo "${1%.*}"
}

# Sets full_version and short_version from a user's X.Y or X.Y.Z; only listed releases.
resolve_version() {
  local wanted=$1 full
  for full in $(known_versions); do
    if [[ $wanted == "$full" || $wanted == "$(short_of "$full")" ]]; then
      full_version=$full
      short_version=$(short_of "$full")
      return 0
    fi
  done
  usage_error "unknown version '$wanted' (known: $(known_versions | tr '\n' ' ')- see docker/versions.txt)"
}

# eia images run on CPU instances: they are tagged with the cpu device.
device_of() {
  if [[ $1 == eia ]]; then echo cpu; else echo "$1"; fi
}

# Parses --version/--arch/--region/--repository and sets: arch, device, full_version,
# short_version, region (may be empty), repository (with -eia for eia), tag_full, tag_short,
# dockerfile, container_name (start.sh/stop.sh). Scripts with extra options remove them
# before calling this.
parse_std_args() {
  local version="" repository_base=$DEFAULT_REPOSITORY
  arch=cpu
  region=""
  while [[ $# -gt 0 ]]; do
    case $1 in
      -v | --version | -a | --arch | -r | --region | -p | --repository)
        [[ $# -ge 2 && -n $2 ]] || usage_error "$1 needs a value"
        case $1 in
          -v | --version) version=$2 ;;
          -a | --arch) arch=$2 ;;
          -r | --region) region=$2 ;;
          -p | --repository) repository_base=$2 ;;
        esac
        shift 2
        ;;
      -h | --help)
        echo "usage: $USAGE"
        exit 0
        ;;
      *) usage_error "unknown argument '$1'" ;;
    esac
  done
  [[ " ${ARCHES[*]} " == *" $arch "* ]] || usage_error "invalid arch '$arch' (cpu, gpu or eia)"
  [[ $repository_base =~ ^[a-z0-9][a-z0-9._/-]*$ ]] || usage_error "invalid repository '$repository_base'"
  resolve_version "${version:-$(known_versions | head -n 1)}"
  device=$(device_of "$arch")
  repository=$repository_base
  if [[ $arch == eia ]]; then repository="$repository_base-eia"; fi
  tag_full="$full_version-$device"
  tag_short="$short_version-$device"
  dockerfile="docker/$short_version/Dockerfile.$arch"
  container_name="sagemaker-tfs-$short_version-$arch"
  [[ -f "$REPO_ROOT/$dockerfile" ]] || die "$dockerfile is missing (run: python docker/generate.py)"
}

# --region, else AWS_REGION / AWS_DEFAULT_REGION, else the AWS CLI's configured region;
# region stays empty when none of them is set.
resolve_region() {
  [[ -n $region ]] || region=${AWS_REGION:-${AWS_DEFAULT_REGION:-}}
  [[ -n $region ]] || region=$(aws configure get region 2>/dev/null || true)
}

require_region() {
  resolve_region
  [[ -n $region ]] || usage_error "no AWS region: pass --region or run 'aws configure'"
}

aws_account() {
  aws sts get-caller-identity --region "$region" --query Account --output text
}

registry_of() {
  echo "$1.dkr.ecr.$region.amazonaws.com"
}

ecr_login() {
  aws ecr get-login-password --region "$region" \
    | docker login --username AWS --password-stdin "$1"
}

# True when `docker` is podman (Debian's podman-docker, or a symlink): podman cannot read the
# inline layer cache Docker writes into published images, and refuses a tagged --cache-from.
engine_is_podman() {
  local version
  version=$(docker version 2>/dev/null || true)
  [[ $version == *"Podman Engine"* ]]
}

# The real path of a CA bundle given with --ca-bundle; a usage error if it is not a file.
resolve_ca_bundle() {
  [[ -f $1 ]] || usage_error "no such CA bundle '$1'"
  realpath "$1"
}

# run_locally_if_asked VERB ARGS...: with --local anywhere in ARGS, replaces this process
# with scripts/local.sh VERB and the other ARGS (the stack on this host, no Docker).
run_locally_if_asked() {
  local verb=$1 arg others=() local_asked=false
  shift
  for arg in "$@"; do
    if [[ $arg == --local ]]; then local_asked=true; else others+=("$arg"); fi
  done
  [[ $local_asked == true ]] || return 0
  [[ -x "$REPO_ROOT/scripts/local.sh" ]] || die "scripts/local.sh is missing"
  exec "$REPO_ROOT/scripts/local.sh" "$verb" "${others[@]}"
}
