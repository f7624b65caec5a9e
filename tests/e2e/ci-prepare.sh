#!/usr/bin/env bash
# Called by CI before pytest: warm the e2e binary caches so the fixtures find them. No-ops when cached.
#   cluster/build.sh       kube-apiserver, etcd, kubectl (the `apiserver` fixture; `kubectl kustomize`)
#   cluster/build-helm.sh  helm (tests/e2e/test_helm_chart.py)
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
"$here/cluster/build.sh"
"$here/cluster/build-helm.sh"
