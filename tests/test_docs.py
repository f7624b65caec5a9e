"""docs/policies.md is generated from the policy files, and must be current."""

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_policies_md_is_current():
    generated = subprocess.run([sys.executable, "-m", "webhook", "policies", "--markdown"], capture_output=True,
                               text=True, check=True, cwd=ROOT).stdout
    with open(os.path.join(ROOT, "docs", "policies.md"), encoding="utf-8") as handle:
        checked_in = handle.read()
    assert checked_in == generated, "docs/policies.md is stale: run `aiadmit policies --markdown > docs/policies.md`"


def test_every_policy_has_a_section_and_a_summary_row():
    with open(os.path.join(ROOT, "docs", "policies.md"), encoding="utf-8") as handle:
        text = handle.read()
    ids = sorted(name[:-5] for name in os.listdir(os.path.join(ROOT, "policies")) if name.endswith(".yaml"))
    assert len(ids) == 17
    for policy_id in ids:
        assert f"\n## {policy_id}\n" in text and f"[`{policy_id}`](#{policy_id})" in text
