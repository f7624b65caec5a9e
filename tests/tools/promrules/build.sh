#!/usr/bin/env bash
# Build tests/tools/promrules (main.go here: Prometheus's own rule-file check, rulefmt.Parse and the PromQL parser
# of github.com/prometheus/prometheus v0.316.0, pinned in go.mod) into
#
#   ${AIADMIT_E2E_CACHE:-$HOME/.cache/aiadmit-e2e}/promrules-<hash>/promrules
#
# with tests/tools/gotool.sh, which keys, locates, locks and builds every small Go test tool the same way (<hash>,
# the environment it reads and the exit codes are described there). A test tool only, never the product.
# tests/test_monitoring.py builds it once per session through tests/promrules.py; tests/e2e/ci-prepare.sh warms it.
# The LAST line on stdout is the binary's path.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/../gotool.sh" "$here" promrules \
  "github.com/prometheus/prometheus v0.316.0 rulefmt + PromQL parser" "github.com/prometheus/prometheus=v0.316.0"
