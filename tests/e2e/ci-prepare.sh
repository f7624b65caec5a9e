#!/usr/bin/env bash
# Called by CI before pytest: warm the e2e binary cache (kube-apiserver, etcd,
# kubectl) so the `apiserver` fixture finds them. A no-op when cached.
set -euo pipefail
"$(dirname "${BASH_SOURCE[0]}")/cluster/build.sh"
