#!/usr/bin/env bash
# Build the pinned `helm` CLI from the Go module proxy (helm.sh/helm/v4 is an ordinary Go module, so
# `go install helm.sh/helm/v4/cmd/helm@<version>` needs nothing but Go and the proxy) into
#
#   ${AIADMIT_E2E_CACHE:-$HOME/.cache/aiadmit-e2e}/helm-<version>/bin/helm
#
# The chart tests (tests/e2e/test_helm_chart.py) run `helm lint` and `helm template` with it, and the single-node
# cluster test installs the chart with it. The version is pinned here and nowhere else; a new pin is a new cache
# directory. Cold and warm build times are in tests/e2e/README.md; a warm cache returns at once.
# All progress goes to stderr; the LAST line on stdout is the helm binary's path.
#
# Environment:
#   AIADMIT_E2E_CACHE   cache root (default $HOME/.cache/aiadmit-e2e)
#   AIADMIT_E2E_GO      go binary (default: `go` on PATH, else /usr/local/go/bin/go)
#   AIADMIT_E2E_GO_P    go build -p parallelism (default 2)
#   AIADMIT_HELM_VERSION  override the pin (default below; a v3.x pin builds helm.sh/helm/v3 the same way)
#   AIADMIT_E2E_REBUILD=1  ignore an existing cache entry and rebuild it
set -euo pipefail

# v4.3.1: the newest Helm the Go module proxy serves (2026-12), on Kubernetes 1.37's client libraries
# (k8s.io/client-go v0.37.1), built by Go 1.26. Helm 3's last minor, v3.22.0 (2026-09-09, also on 1.37's libraries),
# gets security fixes only, until 2027-02-10 (helm.sh/blog/helm-v3-end-of-life): the line users are moving to is 4.
# The chart is plain apiVersion v2; AIADMIT_HELM_VERSION=v3.22.0 runs the same tests on Helm 3.
version="${AIADMIT_HELM_VERSION:-v4.3.1}"
major="${version#v}"; major="${major%%.*}"
module="helm.sh/helm/v$major"

log() { printf '[aiadmit-e2e helm] %s\n' "$*" >&2; }

cache_root="${AIADMIT_E2E_CACHE:-${HOME:-/tmp}/.cache/aiadmit-e2e}"
out="$cache_root/helm-$version"
helm="$out/bin/helm"

mkdir -p "$out"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$out/.lock"
  flock 9
fi

# The stamp holds this script's hash: a changed recipe rebuilds the same version.
recipe="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
if [[ "${AIADMIT_E2E_REBUILD:-0}" != 1 && "$(cat "$out/.complete" 2>/dev/null)" == "$recipe" && -x "$helm" ]]; then
  log "cache hit: $helm"
  echo "$helm"
  exit 0
fi

go_bin="${AIADMIT_E2E_GO:-}"
if [[ -z "$go_bin" ]]; then
  go_bin="$(command -v go || true)"
  [[ -z "$go_bin" && -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go
fi
if [[ -z "$go_bin" || ! -x "$go_bin" ]]; then
  log "ERROR: Go toolchain not found (on PATH, at /usr/local/go/bin/go, or AIADMIT_E2E_GO); it builds helm $version."
  exit 127
fi

# Helm 3's Makefile also stamps the Kubernetes version its client libraries speak (the client-go minor, as 1.<minor>):
# the default of `helm template`'s .Capabilities.KubeVersion and of lint's deprecation checks. Without it they
# stay at the library default (v1.20), and a chart's kubeVersion constraint fails. Read it from helm's own go.mod.
# Helm 4 reads the same from the binary's build information, which `go install` records.
log "downloading $module@$version from the Go module proxy"
moddir="$(GOFLAGS= "$go_bin" mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
client_go="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$moddir/go.mod")"
[[ -n "$client_go" ]] || { log "ERROR: no k8s.io/client-go version in $moddir/go.mod"; exit 1; }
k8s_ldflags=""
if [[ "$major" == 3 ]]; then
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    k8s_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$client_go"
  done
fi

log "building helm $version (Kubernetes 1.$client_go client libraries) into $out/bin with $("$go_bin" version) (cold build: a few minutes on 2 cores)"
tmp="$out/bin.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
# The version ldflag is what Helm's own Makefile sets; without it `helm version` says only the module default.
# GOTOOLCHAIN=auto: helm's go.mod may ask for a newer Go than the local one, and the proxy serves toolchains too.
CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS="-buildvcs=false" \
  "$go_bin" install -p "${AIADMIT_E2E_GO_P:-2}" -trimpath \
  -ldflags="-s -w -X $module/internal/version.version=$version$k8s_ldflags" \
  "$module/cmd/helm@$version" >&2
[[ -x "$tmp/helm" ]] || { log "ERROR: helm was not produced"; exit 1; }
rm -rf "$out/bin"
mv "$tmp" "$out/bin"
trap - EXIT
{
  echo "helm=$version"
  echo "go=$("$go_bin" env GOVERSION)"
  echo "kubernetes-libraries=1.$client_go"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ) seconds=$((SECONDS - start))"
} > "$out/VERSIONS"
echo "$recipe" > "$out/.complete"
log "built in $((SECONDS - start))s: $("$helm" version --short 2>/dev/null || echo '?')"
echo "$helm"
