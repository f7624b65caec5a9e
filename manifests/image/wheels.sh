#!/usr/bin/env bash
# Fill DEST with every wheel the image installs: aiadmit's own (built from pyproject.toml, README.md, webhook/,
# policies/ of the checkout given as SRC, default this repository), the locked dependencies (requirements.lock,
# hash-checked) and the locked pip that installs them (pip.lock). Used by build.sh and by the Dockerfile, so that
# both install the same files. Needs python3 >= 3.11 with pip, and PyPI.
#   manifests/image/wheels.sh DEST [SRC]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="$1"
src="${2:-$(cd "$here/../.." && pwd)}"
source "$here/platform.sh"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_FIND_LINKS=
mkdir -p "$dest"
# A wheel's zip entries carry SOURCE_DATE_EPOCH when it is set (setuptools/wheel), so the same sources give the same
# wheel. Built from a copy holding only what the wheel is made of (what .dockerignore lets in).
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp -r "$src/pyproject.toml" "$src/README.md" "$src/webhook" "$src/policies" "$work/src/"
find "$work/src" \( -name __pycache__ -o -name '*.pyc' -o -name '*.egg-info' \) -prune -exec rm -rf {} +
python3 -m pip wheel -q --no-deps --wheel-dir "$dest" "$work/src" >&2
python3 -m pip download -q --require-hashes --no-deps "${PIP_TARGET_ARGS[@]}" -d "$dest" -r "$here/requirements.lock" >&2
python3 -m pip download -q --require-hashes --no-deps "${PIP_TARGET_ARGS[@]}" -d "$dest" -r "$here/pip.lock" >&2
cp "$here/requirements.lock" "$here/pip.lock" "$dest/"
