"""The audit's text and JSON cannot be misread: resources and findings are counted apart and agree with the table,
a rule that could not be evaluated is counted, and `-v` / JSON say which policies applied and passed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from testdata import ROOT

ERRING = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: name-number
summary: Names are numbers.
why: For a test.
remediation: Rename.
action: deny
match:
  anyClasses: [ai]
target: object
rules:
  - name: numeric
    expression: int(object.metadata.name) > 0
    message: not a number
"""


def aiadmit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


def _table(stdout: str) -> dict:
    rows = {}
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("policy ") and "resources" in line)
    for line in lines[start + 1:]:
        if not line.strip():
            break
        policy, action, fail, skip, error, resources = line.split()
        rows[policy] = (action, int(fail), int(skip), int(error), int(resources))
    return rows


def test_summary_counts_resources_and_findings_apart_and_agrees_with_the_table():
    done = aiadmit("audit", "examples/manifests/")
    assert done.returncode == 1
    last = done.stdout.splitlines()[-1]
    found = re.match(r"^(\d+) resources checked \((\d+) denied, (\d+) warned, (\d+) audit only, (\d+) passed, (\d+) "
                     r"no policy applied\); findings: (\d+) deny, (\d+) warn, (\d+) audit, (\d+) skipped \((\d+) could "
                     r"not be evaluated\); (\d+) input errors$", last)
    assert found, last
    resources, denied, warned, audited, passed, unchecked, deny, warn, audit, skipped, erred, errors = \
        map(int, found.groups())
    assert resources == 2 and (denied, passed) == (1, 1)  # the sample and its compliant twin
    assert resources == denied + warned + audited + passed + unchecked
    table = _table(done.stdout)
    for action, count in (("deny", deny), ("warn", warn), ("audit", audit)):
        assert count == sum(fail + error for a, fail, _, error, _ in table.values() if a == action), action
    assert skipped == sum(skip for _, _, skip, _, _ in table.values())
    document = json.loads(aiadmit("audit", "-f", "json", "examples/manifests/").stdout)
    assert document["summary"]["resourcesBy"] == {"denied": denied, "warned": warned, "audited": audited,
                                                  "passed": passed, "unchecked": unchecked}


def test_a_rule_that_could_not_be_evaluated_is_counted_in_the_summary(tmp_path):
    (tmp_path / "policy.yaml").write_text(ERRING)
    done = aiadmit("audit", "--extra-policies", str(tmp_path / "policy.yaml"),
                   "examples/manifests/pytorchjob-gpu-compliant.yaml")
    table = _table(done.stdout)
    assert table["name-number"][3] == 1
    assert "(1 could not be evaluated)" in done.stdout.splitlines()[-1]
    assert "1 denied" in done.stdout.splitlines()[-1]


def test_verbose_and_json_list_the_policies_that_applied_and_passed():
    done = aiadmit("audit", "-v", "examples/manifests/pytorchjob-gpu-compliant.yaml")
    (line,) = [line for line in done.stdout.splitlines() if ": passed " in line]
    assert line.startswith("examples/manifests/pytorchjob-gpu-compliant.yaml:3:1: PyTorchJob team-a/pytorch-simple: "
                           "passed devices-declared, ")
    assert "shm-sized" in line.split("(applied:")[0] and "gang-admission" in line.split("(applied:")[1]
    assert not [line for line in aiadmit("audit", "examples/manifests/pytorchjob-gpu-compliant.yaml").stdout
                .splitlines() if ": passed " in line]
    (entry,) = json.loads(aiadmit("audit", "-f", "json", "examples/manifests/pytorchjob-gpu-compliant.yaml")
                          .stdout)["resources"]
    assert entry["outcome"] == "passed" and "shm-sized" in entry["passed"]
    assert set(entry["passed"]) < set(entry["applied"]) and "gang-admission" not in entry["passed"]  # it skipped
