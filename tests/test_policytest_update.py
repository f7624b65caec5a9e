"""Policy test cases with `oldObject` (an UPDATE): a ValidatingAdmissionPolicy's `oldObject` expressions and
aiadmit's own UPDATE rule (only new violations are denied) tested offline (docs/policy-tests.md)."""

from __future__ import annotations

import os
import shutil
import textwrap

from webhook.app.policytest import run_test_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "update-test")


def _copy(tmp_path, test_yaml: str) -> str:
    for name in ("no-shrink.yaml", "old.yaml", "resources.yaml"):
        shutil.copy(os.path.join(EXAMPLE, name), tmp_path / name)
    shutil.copy(os.path.join(ROOT, "policies", "shm-sized.yaml"), tmp_path / "shm-sized.yaml")
    (tmp_path / "test.yaml").write_text(textwrap.dedent("""\
        apiVersion: aiadmit.dev/v1alpha1
        kind: PolicyTest
        metadata: {name: t}
        policies: [no-shrink.yaml, shm-sized.yaml]
        resources: [resources.yaml]
        oldResources: [old.yaml]
        cases:
        """) + textwrap.indent(textwrap.dedent(test_yaml), "  "))
    return str(tmp_path / "test.yaml")


def test_the_documented_example_passes():
    run = run_test_file(os.path.join(EXAMPLE, "test.yaml"))
    assert run.errors == [] and run.failed == 0 and run.passed == 5
    assert {r.got for r in run.results} == {"fail", "pass", "already-present"}


def test_old_object_decides_the_vap(tmp_path):
    """The same new object, judged with and without the stored one: only the UPDATE sees 8 -> 2."""
    run = run_test_file(_copy(tmp_path, """\
        - {resource: {kind: Deployment, name: trainer}, oldObject: {kind: Deployment, name: trainer},
           policy: no-sudden-shrink.example.com, expect: pass}
        - {resource: {kind: Deployment, name: trainer}, policy: no-sudden-shrink.example.com, expect: fail}
        """))
    assert run.errors == [] and [r.ok for r in run.results] == [False, False]
    assert "expected pass, got fail" in run.results[0].detail and "8 -> 2" in run.results[0].detail
    assert "expected fail, got pass" in run.results[1].detail


def test_a_new_violation_is_not_already_present(tmp_path):
    """The old object had no /dev/shm either, but a new violation (a hostPath appearing, a GPU limit raised) is
    judged `fail`; and an UPDATE that keeps the old violation is not `fail`."""
    old = (tmp_path / "old.yaml")
    run_dir = _copy(tmp_path, """\
        - {resource: {kind: Deployment, name: trainer}, oldObject: {kind: Deployment, name: trainer},
           policy: shm-sized, expect: already-present}
        - {resource: {kind: Deployment, name: trainer}, oldObject: {kind: Deployment, name: trainer},
           policy: shm-sized, expect: fail}
        """)
    run = run_test_file(run_dir)
    assert [r.ok for r in run.results] == [True, False]
    assert "expected fail, got already-present" in run.results[1].detail
    # the stored object had /dev/shm sized: the missing one is new, so the update fails
    text = old.read_text().replace("      containers:\n", "      volumes: [{name: dshm, emptyDir: {medium: Memory, "
                                   "sizeLimit: 8Gi}}]\n      containers:\n")
    text = text.replace("            limits: {nvidia.com/gpu: 1, memory: 32Gi}\n",
                        "            limits: {nvidia.com/gpu: 1, memory: 32Gi}\n"
                        "          volumeMounts: [{name: dshm, mountPath: /dev/shm}]\n")
    old.write_text(text)
    run = run_test_file(run_dir)
    assert [r.ok for r in run.results] == [False, True], [r.detail for r in run.results]
    assert run.results[0].got == "fail"


def test_format_errors(tmp_path):
    run = run_test_file(_copy(tmp_path, """\
        - {resource: {kind: Deployment, name: trainer}, policy: shm-sized, expect: already-present}
        - {resource: {kind: Deployment, name: trainer}, oldObject: {kind: Deployment, name: nope},
           policy: shm-sized, expect: fail}
        - {resource: {kind: Deployment, name: trainer}, oldObject: {name: trainer}, policy: shm-sized}
        - {resource: {kind: Deployment, name: trainer}, oldObject: {kind: Deployment, name: trainer},
           policy: shm-sized, patch: []}
        """))
    assert run.results == []
    messages = sorted((e.line, e.message) for e in run.errors)
    assert [line for line, _ in messages] == [8, 9, 11, 13]
    assert "already-present judges an UPDATE: the case needs an oldObject" in messages[0][1]
    assert "0 of this test's oldResources match" in messages[1][1]
    assert "oldObject selects one of the test's oldResources by kind and name" in messages[2][1]
    assert "a case with oldObject cannot have one" in messages[3][1]
