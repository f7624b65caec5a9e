#!/usr/bin/env bash
# Build tests/tools/yamljson (main.go here: Kubernetes' YAML-to-JSON conversion, sigs.k8s.io/yaml v1.6.0 over
# go.yaml.in/yaml/v2 v2.4.4, pinned in go.mod) into
#
#   ${AIADMIT_E2E_CACHE:-$HOME/.cache/aiadmit-e2e}/yamljson-<hash>/yamljson
#
# with tests/tools/gotool.sh, which keys, locates, locks and builds every small Go test tool the same way (<hash>,
# the environment it reads and the exit codes are described there). A test tool only, never the product.
# tests/test_yaml_keys.py builds it once per session through tests/yamljson.py. The LAST line on stdout is the
# binary's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../gotool.sh" "$here" yamljson "sigs.k8s.io/yaml v1.6.0 YAMLToJSON" \
  "sigs.k8s.io/yaml=v1.6.0 go.yaml.in/yaml/v2=v2.4.4"
