#!/usr/bin/env bash
# Build the pinned node binaries of the single-node cluster harness
# (kubelet, kube-controller-manager, kube-scheduler, kube-proxy) from the Go module proxy,
# at the same k8s.io/kubernetes version as ../cluster (kube-apiserver, etcd,
# kubectl), into a content-addressed cache directory:
#
#   ${AIADMIT_E2E_CACHE:-$HOME/.cache/aiadmit-e2e}/node-<hash>/bin/
#
# <hash> covers go.mod, go.sum, tools.go and this script. Same recipe as
# ../cluster/build.sh (static, -trimpath, version stamped by -ldflags), kept in
# a module of its own so that adding the node does not move the control
# plane's pins or invalidate its cache. Progress goes to stderr; the LAST line
# on stdout is the bin directory.
#
# A cold build is long (kubelet pulls in cadvisor, CRI, volume plugins): 346 s
# here (v1.37.2, 2 cores) right after the control plane's build into the same
# Go build cache, more without one. ../ci-prepare.sh runs it under a time limit;
# the cluster tests only check the cache (--check) and skip when it is empty.
#
# Environment:
#   AIADMIT_E2E_CACHE   cache root (default $HOME/.cache/aiadmit-e2e)
#   AIADMIT_E2E_GO      go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   AIADMIT_E2E_GO_P    go build -p parallelism (default 1: the machine is shared)
#   AIADMIT_E2E_REBUILD=1  ignore an existing cache entry and rebuild it
#   --check             only report: exit 0 and print the bin dir if cached, else exit 3
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

log() { printf '[aiadmit-e2e node build] %s\n' "$*" >&2; }

inputs=(go.mod go.sum tools.go build.sh)
hash="$(cat "${inputs[@]}" | sha256sum | cut -c1-16)"
cache_root="${AIADMIT_E2E_CACHE:-${HOME:-/tmp}/.cache/aiadmit-e2e}"
out="$cache_root/node-$hash"
bin="$out/bin"
binaries=(kubelet kube-controller-manager kube-scheduler kube-proxy)

is_complete() {
  [[ -f "$out/.complete" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

if [[ "${1:-}" == --check ]]; then
  if is_complete; then echo "$bin"; exit 0; fi
  log "not built: $bin (run $here/build.sh)"
  exit 3
fi

mkdir -p "$out"
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
  log "       or set AIADMIT_E2E_GO). It is required to build kubelet and friends."
  exit 127
fi

k8s_version="$(GOTOOLCHAIN=local "$go_bin" list -m -f '{{.Version}}' k8s.io/kubernetes)"
cluster_version="$(cd ../cluster && GOTOOLCHAIN=local "$go_bin" list -m -f '{{.Version}}' k8s.io/kubernetes)"
if [[ "$k8s_version" != "$cluster_version" ]]; then
  log "ERROR: node pins k8s.io/kubernetes $k8s_version but ../cluster pins $cluster_version"
  exit 1
fi
major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
vpkgs=(k8s.io/component-base/version k8s.io/client-go/pkg/version)
ldflags="-s -w"
for p in "${vpkgs[@]}"; do
  ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$build_date"
done

log "building ${binaries[*]} ($k8s_version) into $bin (cold build: tens of minutes on 2 cores)"
log "go: $("$go_bin" version)"
tmp="$out/bin.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
  "$go_bin" build -p "${AIADMIT_E2E_GO_P:-1}" -trimpath -ldflags="$ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kubelet \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kube-proxy >&2
for b in "${binaries[@]}"; do
  [[ -x "$tmp/$b" ]] || { log "ERROR: $b was not produced"; exit 1; }
done
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
{
  echo "kubernetes=$k8s_version"
  echo "go=$("$go_bin" env GOVERSION)"
  echo "built=$build_date seconds=$((SECONDS - start))"
} > "$out/VERSIONS"
touch "$out/.complete"
log "built in $((SECONDS - start))s: $(ls "$bin" | tr '\n' ' ')"
echo "$bin"
