"""`aiadmit test` as a policy author runs it: a test that cannot mean what it says is a format error (exit 2, at
its file:line:col), counts are of cases, idempotency only where a policy mutates, JSON/JUnit/table output, and
`--init` writes a starting test that runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from xml.etree import ElementTree

from testdata import ROOT

# The example policy the docs scaffold tests for (docs/policy-tests.md).
POLICY = open(os.path.join(ROOT, "examples", "policies", "team-label.yaml"), encoding="utf-8").read()

RESOURCES = """\
apiVersion: v1
kind: Pod
metadata: {name: unlabelled, namespace: ml}
spec:
  containers: [{name: c, image: r/i:1, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: labelled, namespace: ml, labels: {team: vision}}
spec:
  containers: [{name: c, image: r/i:1, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: ml}
data: {a: b}
"""

HEAD = """\
apiVersion: aiadmit.dev/v1alpha1
kind: PolicyTest
metadata: {name: team}
policies: [team-label.yaml]
resources: [resources.yaml]
cases:
"""


def aiadmit(*args, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def _suite(tmp_path, cases: str):
    (tmp_path / "team-label.yaml").write_text(POLICY)
    (tmp_path / "resources.yaml").write_text(RESOURCES)
    (tmp_path / "test.yaml").write_text(HEAD + cases)
    return str(tmp_path)


def test_unknown_policy_id_is_a_format_error_at_its_line(tmp_path):
    suite = _suite(tmp_path, "- {resource: {kind: Pod, name: labelled}, policy: team-labl, expect: pass}\n")
    done = aiadmit("test", suite)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{suite}/test.yaml:7:" in done.stderr and "unknown policy id 'team-labl'" in done.stderr
    assert "did you mean 'team-label'" in done.stderr and ": error: " in done.stderr


def test_invalid_expect_unknown_rule_unknown_key_and_unmatched_resource_are_format_errors(tmp_path):
    suite = _suite(tmp_path, """\
- {resource: {kind: Pod, name: labelled}, policy: team-label, expect: pas}
- {resource: {kind: Pod, name: unlabelled}, policy: team-label, expect: fail, rules: [has-tem]}
- {resource: {kind: Pod, name: unlabelled}, policy: team-label, expect: fail, mesageContains: team}
- {resource: {kind: Pod, name: nobody}, policy: team-label, expect: fail}
""")
    done = aiadmit("test", suite)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith(f"{suite}/test.yaml:7:") and "expect must be one of" in line for line in lines)
    assert any(line.startswith(f"{suite}/test.yaml:8:") and "no rule 'has-tem'" in line for line in lines)
    assert any(line.startswith(f"{suite}/test.yaml:9:") and "unknown key 'mesageContains'" in line for line in lines)
    assert any(line.startswith(f"{suite}/test.yaml:10:") and "no resource of this test matches" in line
               for line in lines)
    assert "4 format errors" in done.stdout


def test_a_directory_without_test_documents_is_a_format_error(tmp_path):
    (tmp_path / "values.yaml").write_text("replicas: 3\n")
    done = aiadmit("test", str(tmp_path))
    assert done.returncode == 2
    assert f"{tmp_path}:0:0: error: no PolicyTest document here" in done.stderr
    assert "1 failed" not in done.stdout


def test_not_applicable_is_an_outcome_and_pass_means_applied(tmp_path):
    suite = _suite(tmp_path, """\
- {resource: {kind: ConfigMap, name: settings}, policy: team-label, expect: not-applicable}
- {resource: {kind: Pod, name: labelled}, policy: team-label, expect: pass}
""")
    assert aiadmit("test", suite).returncode == 0
    (tmp_path / "test.yaml").write_text(HEAD + "- {resource: {kind: ConfigMap, name: settings}, policy: team-label,"
                                               " expect: pass}\n")
    done = aiadmit("test", suite)
    assert done.returncode == 1 and "expected pass, got not-applicable" in done.stdout


def test_counts_are_cases_and_idempotency_only_for_mutating_policies(tmp_path):
    suite = _suite(tmp_path, """\
- {resource: {kind: Pod, name: labelled}, policy: team-label, expect: pass}
- {resource: {kind: Pod, name: unlabelled}, policy: team-label, expect: fail, rules: [has-team]}
""")
    done = aiadmit("test", suite)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "2 cases: 2 passed, 0 failed"
    summary = json.loads(aiadmit("test", "-f", "json", suite).stdout)["summary"]
    assert summary == {"cases": 2, "passed": 2, "failed": 0, "errors": 0,
                       "idempotency": {"checked": 0, "passed": 0, "failed": 0}}
    shm = json.loads(aiadmit("test", "-f", "json", os.path.join(ROOT, "tests", "policies", "shm-sized")).stdout)
    assert shm["summary"]["idempotency"]["checked"] >= 1 and shm["summary"]["cases"] == len(shm["cases"])
    assert all(entry["expect"] == "idempotent" for entry in shm["idempotency"])


def test_text_table_json_and_junit_agree(tmp_path):
    suite = _suite(tmp_path, """\
- {resource: {kind: Pod, name: labelled}, policy: team-label, expect: pass}
- {resource: {kind: Pod, name: unlabelled}, policy: team-label, expect: pass}
""")
    done = aiadmit("test", suite)
    assert done.returncode == 1
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("ok ", "FAIL "))]
    assert [row[:4] for row in rows] == [["ok", "team-label", "pass", "pass"], ["FAIL", "team-label", "pass", "fail"]]
    assert rows[1][-1] == f"{suite}/test.yaml:8"
    document = json.loads(aiadmit("test", "--format", "json", suite).stdout)
    assert [(c["ok"], c["got"], c["line"]) for c in document["cases"]] == [(True, "pass", 7), (False, "fail", 8)]
    root = ElementTree.fromstring(aiadmit("test", "--format", "junit", suite).stdout)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "0")
    failure = root.find("./testsuite/testcase/failure")
    assert failure is not None and "has no team label" in failure.text


def test_init_writes_a_test_that_runs(tmp_path):
    shm = tmp_path / "shm"
    done = aiadmit("test", "--init", os.path.join(ROOT, "policies", "shm-sized.yaml"), "-o", str(shm))
    assert done.returncode == 0, done.stderr
    run = json.loads(aiadmit("test", "-f", "json", str(shm)).stdout)
    assert [(c["expect"], c["got"]) for c in run["cases"]] == [("fail", "fail"), ("pass", "pass")]
    again = aiadmit("test", "--init", os.path.join(ROOT, "policies", "shm-sized.yaml"), "-o", str(shm))
    assert again.returncode == 2 and "does not overwrite" in again.stderr


def test_init_without_a_fix_leaves_the_author_a_failing_case_to_edit(tmp_path):
    (tmp_path / "team-label.yaml").write_text(POLICY)
    done = aiadmit("test", "--init", str(tmp_path / "team-label.yaml"))
    assert done.returncode == 0, done.stderr
    directory = tmp_path / "tests" / "team-label"
    assert "edit it until the policy passes it" in done.stderr
    assert "# TODO" in (directory / "test.yaml").read_text()
    run = aiadmit("test", str(directory))
    assert run.returncode == 1 and "1 passed, 1 failed" in run.stdout
