#!/usr/bin/env bash
# Called by CI before pytest: warm the caches the e2e tests use, so that pytest itself never builds for long.
# Each step is a no-op (seconds) when its cache is warm.
#  1. the control plane (kube-apiserver, etcd, kubectl): tests/e2e/cluster/build.sh
#  2. Debian packages of the image build and of the single-node cluster, installed only when missing
#  3. the node (kubelet, kube-proxy, kube-controller-manager, kube-scheduler): tests/e2e/node/build.sh, bounded
#     in time so that CI's 90 minutes hold on a machine without a Go build cache; when it does not finish, the
#     tests of tests/e2e/install that need it skip and say so
#  4. the aiadmit image: manifests/image/build.sh (about 2 minutes cold)
#  5. helm: tests/e2e/cluster/build-helm.sh (tests/e2e/test_helm_chart.py, and the Helm install of
#     tests/e2e/install/test_install.py)
#  6. the Kubernetes CEL oracle: tests/tools/k8scel/build.sh (tests/test_k8scel_*.py; seconds after step 1, about
#     three minutes alone cold)
#  7. the Dockerfile built by buildah on a local Debian base (tests/e2e/install/dockerbuild.py; about 1-3.5 minutes
#     cold, bounded to 15), for tests/e2e/install/test_dockerfile.py and the cluster test's upgrade to that image
#  8. promrules, Prometheus's rule-file parser: tests/tools/promrules/build.sh (tests/test_monitoring.py; about
#     20 s cold with the module downloads cached)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
warn() { printf '[ci-prepare] warning: %s\n' "$*" >&2; }

"$here/cluster/build.sh"
"$here/cluster/build-helm.sh"
"$repo/tests/tools/k8scel/build.sh"
"$repo/tests/tools/promrules/build.sh" || warn "promrules did not build; tests/test_monitoring.py will skip and say why"

packages=(mmdebstrap containerd runc containernetworking-plugins iptables buildah)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "[ci-prepare] apt-get install ${missing[*]}" >&2
    { timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 \
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
      || warn "installing ${missing[*]} failed: the image and cluster tests will skip with the reason"
  else
    warn "missing Debian packages ${missing[*]} (not root or no apt-get): the image and cluster tests will skip"
  fi
fi

timeout "${AIADMIT_E2E_NODE_BUILD_TIMEOUT:-1500}" "$here/node/build.sh" \
  || warn "tests/e2e/node/build.sh did not finish (exit $?): the cluster tests will skip with the reason"

if [[ "$(id -u)" == 0 ]] && command -v mmdebstrap >/dev/null; then
  "$repo/manifests/image/build.sh" >/dev/null || warn "manifests/image/build.sh failed: tests/e2e/install will show why"
fi
if [[ "$(id -u)" == 0 ]] && command -v buildah >/dev/null && command -v mmdebstrap >/dev/null; then
  timeout 900 python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import dockerbuild; dockerbuild.dockerfile_image()' \
    "$here/install" >/dev/null || warn "building the Dockerfile with buildah failed: test_dockerfile.py will show why"
fi
