# Sourced by build.sh and lock.sh: what the image's interpreter accepts, for `pip download` on another host.
# Debian bookworm: CPython 3.11, glibc 2.36, x86_64.
DEBIAN_SUITE=bookworm
PY_VERSION=3.11
PIP_TARGET_ARGS=(--only-binary=:all: --implementation cp --python-version "$PY_VERSION"
  --abi cp311 --abi abi3 --abi none --platform any)
for _glibc in 5 12 17 24 28 31 34 35 36; do
  PIP_TARGET_ARGS+=(--platform "manylinux_2_${_glibc}_x86_64")
done
PIP_TARGET_ARGS+=(--platform manylinux1_x86_64 --platform manylinux2010_x86_64 --platform manylinux2014_x86_64)
unset _glibc
