#!/usr/bin/env bash
# Regenerates docker/requirements.lock and docker/build-requirements.lock from their .in
# files with uv: every distribution pip installs in the image build, pinned, with the sha256
# of each of its files, for `pip install --require-hashes`. One universal resolution serves
# every image's Python (3.12 on gpu, 3.13 on cpu/eia); wheels only (no compiler in the build).
set -euo pipefail
cd "$(dirname "$0")/.."
UV_VERSION=0.13.8
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/pip" install --quiet "uv==$UV_VERSION"
for name in requirements build-requirements; do
    "$tools/bin/uv" pip compile "docker/$name.in" --output-file "docker/$name.lock" \
        --universal --python-version 3.12 --only-binary :all: --generate-hashes \
        --custom-compile-command scripts/lock.sh --quiet
done
