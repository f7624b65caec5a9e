#!/usr/bin/env bash
# What installing aiadmit costs: packages, size and time of each install variant in a fresh virtualenv, and the
# pre-commit hook's first run (pre-commit builds the hook's environment, then audits one file).
#
#   bench/install.sh [REPO] [BASELINE_REPO]
#
# REPO (default: this checkout) and BASELINE_REPO (optional, e.g. an older commit's clone, measured in the same run)
# must be git checkouts. No pip cache (downloads count); results on stdout, one line per measurement.
set -uo pipefail
repo="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
baseline="${2:-}"
work="$(mktemp -d /tmp/aiadmit-install-XXXXXX)"
trap 'rm -rf "$work"' EXIT
python="${PYTHON:-python3}"

for variant in "cli:." "webhook:.[webhook]" "test:.[test]"; do
  name=${variant%%:*}; spec=${variant#*:}
  "$python" -m venv "$work/v-$name"
  before=$(du -sk "$work/v-$name" | cut -f1)
  start=$(date +%s.%N)
  (cd "$repo" && timeout 1200 "$work/v-$name/bin/pip" install -q --no-cache-dir --disable-pip-version-check "$spec") \
    > "$work/log-$name" 2>&1
  rc=$?
  end=$(date +%s.%N)
  after=$(du -sk "$work/v-$name" | cut -f1)
  packages=$("$work/v-$name/bin/pip" list --format=freeze 2>/dev/null | grep -cvE '^(aiadmit|pip|setuptools)=')
  echo "install $name: rc=$rc seconds=$(echo "$end - $start" | bc) added_MB=$(( (after - before) / 1024 )) packages=$packages"
  rm -rf "$work/v-$name"
done

for entry in "repo:$repo" ${baseline:+"baseline:$baseline"}; do
  name=${entry%%:*}; source=${entry#*:}
  rev=$(git -C "$source" rev-parse HEAD)
  mkdir -p "$work/pc-$name/home" "$work/pc-$name/work"
  cd "$work/pc-$name/work" && git init -q .
  cp "$repo/examples/manifests/pytorchjob-gpu-compliant.yaml" job.yaml
  printf "repos:\n  - repo: %s\n    rev: %s\n    hooks:\n      - id: aiadmit-audit\n" "$source" "$rev" \
    > .pre-commit-config.yaml
  git add -A
  start=$(date +%s.%N)
  PIP_NO_CACHE_DIR=1 PRE_COMMIT_HOME="$work/pc-$name/home" timeout 1200 pre-commit run aiadmit-audit --files job.yaml \
    > "$work/pc-$name.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  echo "pre-commit first run ($name ${rev:0:12}): rc=$rc seconds=$(echo "$end - $start" | bc)" \
       "home_MB=$(( $(du -sk "$work/pc-$name/home" | cut -f1) / 1024 ))"
  cd "$repo"
done
