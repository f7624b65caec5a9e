#!/usr/bin/env bash
# Build one small Go test tool of tests/tools (its main.go, go.mod, go.sum and build.sh in DIR) into
#
#   ${AIADMIT_E2E_CACHE:-$HOME/.cache/aiadmit-e2e}/NAME-<hash>/NAME
#
# Usage (from DIR/build.sh): gotool.sh DIR NAME WHAT VERSIONS
#   WHAT      what the tool is built from, for the log line of a cold build
#   VERSIONS  the pinned modules, written first into NAME-<hash>/VERSIONS
#
# <hash>: the first 16 hex digits of the sha256 of DIR's main.go go.mod go.sum build.sh and of this script, so a
# changed tool, or a changed way of building it, is a new entry. Test tools only, never the product; one script so
# that every such tool is keyed, located, locked and built the same way (tests/gotools.py is the Python side). All
# progress goes to stderr; the LAST line on stdout is the binary's path. Exit 127: no Go toolchain.
#
# Environment:
#   AIADMIT_E2E_CACHE   cache root (default $HOME/.cache/aiadmit-e2e)
#   AIADMIT_E2E_GO      go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   AIADMIT_E2E_GO_P    go build -p parallelism (default 2)
#   AIADMIT_E2E_REBUILD=1  ignore an existing cache entry and rebuild it
set -euo pipefail
if (($# != 4)); then
  printf 'usage: %s DIR NAME WHAT VERSIONS\n' "$0" >&2
  exit 2
fi
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
here="$(cd "$1" && pwd)"
name="$2" what="$3" versions="$4"
log() { printf '[aiadmit %s] %s\n' "$name" "$*" >&2; }

hash="$(cd "$here" && cat main.go go.mod go.sum build.sh "$self" | sha256sum | cut -c1-16)"
cache_root="${AIADMIT_E2E_CACHE:-${HOME:-/tmp}/.cache/aiadmit-e2e}"
out="$cache_root/$name-$hash"
bin="$out/$name"

mkdir -p "$out"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$out/.lock"
  flock 9
fi
if [[ "${AIADMIT_E2E_REBUILD:-0}" != 1 && -f "$out/.complete" && -x "$bin" ]]; then
  log "cache hit: $bin"
  echo "$bin"
  exit 0
fi

go_bin="${AIADMIT_E2E_GO:-}"
if [[ -z "$go_bin" ]]; then
  go_bin="$(command -v go || true)"
  [[ -z "$go_bin" && -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go
fi
if [[ -z "$go_bin" || ! -x "$go_bin" ]]; then
  log "ERROR: Go toolchain not found (on PATH, at /usr/local/go/bin/go, or AIADMIT_E2E_GO); it builds $name."
  exit 127
fi

log "building $name ($what) into $out with" \
    "$("$go_bin" version): its sources hash to $hash and no build of them is cached"
start=$SECONDS
tmp="$out/$name.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$here" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" \
  "$go_bin" build -p "${AIADMIT_E2E_GO_P:-2}" -trimpath -ldflags="-s -w" -o "$tmp" .) >&2
mv "$tmp" "$bin"
trap - EXIT
{
  echo "$versions"
  echo "go=$("$go_bin" env GOVERSION)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$((SECONDS - start))"
} > "$out/VERSIONS"
touch "$out/.complete"
log "built in $((SECONDS - start))s: $bin"
echo "$bin"
