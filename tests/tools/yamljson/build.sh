#!/usr/bin/env bash
# Build tests/tools/yamljson (main.go here: Kubernetes' YAML-to-JSON conversion, sigs.k8s.io/yaml v1.6.0 over
# go.yaml.in/yaml/v2 v2.4.4, pinned in go.mod) into
#
#   ${AIADMIT_E2E_CACHE:-$HOME/.cache/aiadmit-e2e}/yamljson-<hash>/yamljson
#
# <hash>: the first 16 hex digits of the sha256 of main.go go.mod go.sum build.sh, so a changed tool is a new
# entry. A test tool only, never the product. tests/test_yaml_keys.py builds it once per session through
# tests/yamljson.py. All progress goes to stderr; the LAST line on stdout is the binary's path.
#
# Environment:
#   AIADMIT_E2E_CACHE   cache root (default $HOME/.cache/aiadmit-e2e)
#   AIADMIT_E2E_GO      go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   AIADMIT_E2E_GO_P    go build -p parallelism (default 2)
#   AIADMIT_E2E_REBUILD=1  ignore an existing cache entry and rebuild it
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { printf '[aiadmit yamljson] %s\n' "$*" >&2; }

hash="$(cd "$here" && cat main.go go.mod go.sum build.sh | sha256sum | cut -c1-16)"
cache_root="${AIADMIT_E2E_CACHE:-${HOME:-/tmp}/.cache/aiadmit-e2e}"
out="$cache_root/yamljson-$hash"
bin="$out/yamljson"

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
  log "ERROR: Go toolchain not found (on PATH, at /usr/local/go/bin/go, or AIADMIT_E2E_GO); it builds yamljson."
  exit 127
fi

log "building yamljson (sigs.k8s.io/yaml v1.6.0 YAMLToJSON) into $out with" \
    "$("$go_bin" version): its sources hash to $hash and no build of them is cached"
start=$SECONDS
tmp="$out/yamljson.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$here" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" \
  "$go_bin" build -p "${AIADMIT_E2E_GO_P:-2}" -trimpath -ldflags="-s -w" -o "$tmp" .) >&2
mv "$tmp" "$bin"
trap - EXIT
{
  echo "sigs.k8s.io/yaml=v1.6.0 go.yaml.in/yaml/v2=v2.4.4"
  echo "go=$("$go_bin" env GOVERSION)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$((SECONDS - start))"
} > "$out/VERSIONS"
touch "$out/.complete"
log "built in $((SECONDS - start))s: $bin"
echo "$bin"
