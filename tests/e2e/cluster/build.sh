#!/usr/bin/env bash
# Build the pinned e2e control plane binaries (kube-apiserver, kubectl, etcd)
# from the Go module proxy, into a content-addressed cache directory:
#
#   ${AIADMIT_E2E_CACHE:-$HOME/.cache/aiadmit-e2e}/<hash>/bin/
#
# <hash> covers go.mod, go.sum, tools.go, cmd/etcd/main.go and this script, so
# the cache is reused until a pinned version (or the build recipe) changes.
# All progress goes to stderr; the LAST line on stdout is the bin directory.
#
# Environment:
#   AIADMIT_E2E_CACHE   cache root (default $HOME/.cache/aiadmit-e2e)
#   AIADMIT_E2E_GO      go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   AIADMIT_E2E_GO_P    go build -p parallelism (default 2)
#   AIADMIT_E2E_REBUILD=1  ignore an existing cache entry and rebuild it
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

log() { printf '[aiadmit-e2e build] %s\n' "$*" >&2; }

inputs=(go.mod go.sum tools.go cmd/etcd/main.go build.sh)
hash="$(cat "${inputs[@]}" | sha256sum | cut -c1-16)"
cache_root="${AIADMIT_E2E_CACHE:-${HOME:-/tmp}/.cache/aiadmit-e2e}"
out="$cache_root/$hash"
bin="$out/bin"
binaries=(kube-apiserver kubectl etcd)

is_complete() {
  [[ -f "$out/.complete" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

mkdir -p "$out"
# Serialise concurrent builders (parallel CI steps, pytest sessions).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$out/.lock"
  flock 9
fi

if [[ "${AIADMIT_E2E_REBUILD:-0}" != 1 ]] && is_complete; then
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
  log "ERROR: Go toolchain not found (need go >= 1.26 on PATH, at /usr/local/go/bin/go,"
  log "       or set AIADMIT_E2E_GO). It is required to build kube-apiserver/etcd/kubectl."
  exit 127
fi

k8s_version="$(GOTOOLCHAIN=local "$go_bin" list -m -f '{{.Version}}' k8s.io/kubernetes)"
major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
vpkgs=(k8s.io/component-base/version k8s.io/client-go/pkg/version)
ldflags="-s -w"
for p in "${vpkgs[@]}"; do
  ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$build_date"
done

log "building kube-apiserver, kubectl ($k8s_version) and etcd into $bin (cold build: tens of minutes on 2 cores)"
log "go: $("$go_bin" version)"
tmp="$out/bin.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
  "$go_bin" build -p "${AIADMIT_E2E_GO_P:-2}" -trimpath -ldflags="$ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kubectl \
  ./cmd/etcd >&2
for b in "${binaries[@]}"; do
  [[ -x "$tmp/$b" ]] || { log "ERROR: $b was not produced"; exit 1; }
done
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
{
  echo "kubernetes=$k8s_version"
  echo "etcd=$(GOTOOLCHAIN=local "$go_bin" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
  echo "go=$("$go_bin" env GOVERSION)"
  echo "built=$build_date seconds=$((SECONDS - start))"
} > "$out/VERSIONS"
touch "$out/.complete"
log "built in $((SECONDS - start))s: $(ls "$bin" | tr '\n' ' ')"
echo "$bin"
