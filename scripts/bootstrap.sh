#!/usr/bin/env bash
# Installs what a fresh machine lacks to run the stack and its tests on the host:
# nginx with njs and Prometheus (the metrics test scrapes the stack with it; Debian packages,
# when running as root) and a virtualenv in .venv
# holding this package, TensorFlow (for the stand-in model server) and tox.
# --engine installs the container engine the image tests use instead (podman with runc,
# its network stack, and debootstrap for the Debian base image; Debian packages, as root).
set -euo pipefail
cd "$(dirname "$0")/.."

NJS_MODULE=/usr/lib/nginx/modules/ngx_http_js_module.so

install_debian_packages() {
  local missing=()
  command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
  [ -f "$NJS_MODULE" ] || missing+=(libnginx-mod-http-js)
  command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
  command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: missing Debian packages: ${missing[*]} (run as root or apt-get install them)" >&2
    exit 1
  fi
  echo "bootstrap: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_virtualenv() {
  if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv"
    python3 -m venv .venv
  fi
  if ! .venv/bin/python -c "import sagemaker_tfs, tensorflow_serving, tox, websockets, zlib_ng" >/dev/null 2>&1; then
    echo "bootstrap: installing Python packages into .venv"
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e '.[test]' tox
  fi
}

ENGINE_PACKAGES=(podman runc netavark aardvark-dns iptables debootstrap)

install_engine() {
  if command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 \
    && command -v debootstrap >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: podman, runc or debootstrap missing (run as root or apt-get install ${ENGINE_PACKAGES[*]})" >&2
    exit 1
  fi
  echo "bootstrap: installing ${ENGINE_PACKAGES[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${ENGINE_PACKAGES[@]}" >/dev/null
}

case "${1:-}" in
  --engine) install_engine ;;
  "")
    install_debian_packages
    install_virtualenv
    ;;
  *)
    echo "usage: $0 [--engine]" >&2
    exit 2
    ;;
esac
