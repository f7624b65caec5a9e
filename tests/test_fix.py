"""`aiadmit fix`: the webhook's own patch, written into the YAML with everything else kept.

The corpus round trip is generic over whatever policies mutate today: it asks
the engine, not a list in this file.
"""

import base64
import json
import os
import shutil
import subprocess
import sys

import jsonpatch
import pytest
import yaml

from webhook.app.admission import mutate as admission_mutate
from webhook.app.audit import audit_paths
from webhook.engine.core import Engine
from webhook.model.facts import OfflineFacts
from webhook.outputs.fix import fix_paths, split_documents
from webhook.inputs.sources import load_text

HERE = os.path.dirname(__file__)
from testdata import CORPUS  # tests/data/corpus, in the repository

POD = """\
# A GPU pod as people write it: comments, quotes, flow style, odd key order.
apiVersion: v1
kind: Pod
metadata:
  name: "trainer"   # quoted on purpose
  namespace: ml
spec:
  containers:
    - name: main
      image: 'registry.example/train:v1'
      args: [--epochs, "3"]
      resources:
        limits: {nvidia.com/gpu: 1, memory: 32Gi}
  restartPolicy: Never
---
# an unrelated document stays byte for byte
apiVersion: v1
kind: ConfigMap
metadata:    {name: settings}
data:
  key:   "value"
"""

EXPECTED = """\
# A GPU pod as people write it: comments, quotes, flow style, odd key order.
apiVersion: v1
kind: Pod
metadata:
  name: "trainer"   # quoted on purpose
  namespace: ml
spec:
  containers:
    - name: main
      image: 'registry.example/train:v1'
      args: [--epochs, "3"]
      resources:
        limits: {nvidia.com/gpu: 1, memory: 32Gi}
      volumeMounts:
        - name: dshm
          mountPath: /dev/shm
  restartPolicy: Never
  volumes:
    - name: dshm
      emptyDir:
        medium: Memory
        sizeLimit: 8Gi
---
# an unrelated document stays byte for byte
apiVersion: v1
kind: ConfigMap
metadata:    {name: settings}
data:
  key:   "value"
"""


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


def aiadmit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def _comments(text):
    return sorted(line.strip() for line in text.splitlines() if line.strip().startswith("#"))


def _webhook_patched(engine, resource, facts):
    """What the mutating webhook answers for this object, applied with a real RFC 6902 implementation."""
    request = {"uid": "u", "operation": "CREATE", "namespace": resource.namespace or "default",
               "kind": {"group": resource.group, "version": resource.api_version.split("/")[-1],
                        "kind": resource.kind},
               "name": resource.name, "object": resource.obj, "userInfo": {"username": "someone"}}
    response = admission_mutate(engine, request, facts).response
    if "patch" not in response:
        return resource.obj
    patch = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(resource.obj, patch)


def test_pod_gets_shm_with_comments_quotes_flow_style_and_other_documents_kept(engine, tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    result = aiadmit("fix", "--policy", "shm-sized", str(path))
    assert result.returncode == 0, result.stderr
    assert path.read_text() == EXPECTED
    assert "fixed Pod ml/trainer: 2 addition(s) by shm-sized" in result.stderr
    again = aiadmit("fix", "--policy", "shm-sized", str(path))
    assert again.returncode == 0 and path.read_text() == EXPECTED
    assert "0 changed" in again.stderr


def test_check_changes_nothing_and_diff_is_unified(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    check = aiadmit("fix", "--check", "--diff", "--policy", "shm-sized", str(path))
    assert check.returncode == 1
    assert path.read_text() == POD
    assert check.stdout.startswith(f"--- {path}\n+++ {path}\n@@ ")
    assert "+      volumeMounts:\n" in check.stdout and "+        sizeLimit: 8Gi\n" in check.stdout
    assert "would fix Pod ml/trainer" in check.stderr
    aiadmit("fix", "--policy", "shm-sized", str(path))
    assert aiadmit("fix", "--check", "--policy", "shm-sized", str(path)).returncode == 0


def test_templates_are_skipped_broken_yaml_is_an_error_and_left_alone(tmp_path):
    (tmp_path / "chart.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}\n"
                                         "  labels: {{- toYaml .Values.labels | nindent 4 }}\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text(POD + "---\nkind: Pod\nspec: [unclosed\n")
    result = aiadmit("fix", str(tmp_path))
    assert result.returncode == 2
    assert f"{broken}:" in result.stderr and "YAML" in result.stderr and "Traceback" not in result.stderr
    assert broken.read_text() == POD + "---\nkind: Pod\nspec: [unclosed\n"
    assert "chart.yaml" not in result.stderr.split("files checked")[0].replace("skipped", "")
    assert aiadmit("fix", "-").returncode == 2


def test_split_documents_gives_the_text_back():
    text = "# head\n---\na: 1\n--- # second\nb: 2\n...\n---\n"
    assert "".join(s.separator + s.body for s in split_documents(text)) == text
    assert [s.separator for s in split_documents(text)] == ["", "---\n", "--- # second\n", "---\n"]


def test_corpus_round_trip(engine, tmp_path):
    """Fix the whole corpus; then the webhook's patch is what was written, no comment is lost, documents
    without changes keep their bytes, the audit shows none of the mutating policies on what was fixed, and a
    second fix changes nothing."""
    root = tmp_path / "corpus"
    shutil.copytree(CORPUS, root)
    originals = {str(p): p.read_text() for p in root.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml")}
    results = fix_paths(engine, [str(root)])
    changed = [r for r in results if r.changed]
    assert len(changed) >= 20, f"only {len(changed)} corpus files changed; the bundle's mutations do nothing?"
    for result in results:
        # only unreadable input may stop a file; engine-side mutation errors are warnings, like in the webhook
        assert all("YAML" in e.message or "cannot read" in e.message for e in result.errors), result.errors
    mutating = {p.id for p in engine.policies if p.mutations}
    for result in changed:
        original, fixed = originals[result.path], result.fixed
        with open(result.path, encoding="utf-8") as handle:
            assert handle.read() == fixed
        missing = [c for c in _comments(original) if c not in _comments(fixed)]
        assert not missing, f"{result.path}: lost comments {missing}"
        before, after = split_documents(original), split_documents(fixed)
        assert len(before) == len(after), result.path
        for old, new in zip(before, after):
            assert old.separator == new.separator
            if yaml.safe_load(old.body) == yaml.safe_load(new.body):
                assert old.body == new.body, f"{result.path}: an unchanged document was rewritten"
        # what was written is, document for document, the mutating webhook's answer
        old_resources = load_text(original, result.path).resources
        new_resources = load_text(fixed, result.path).resources
        facts = OfflineFacts(old_resources)
        assert len(old_resources) == len(new_resources)
        for old, new in zip(old_resources, new_resources):
            assert new.obj == _webhook_patched(engine, old, facts), f"{result.path}: {old.describe()}"
        # and the audit of the fixed file has nothing left to say for the policies that changed it
        audit = audit_paths(engine, [result.path])
        for evaluation in audit.evaluations:
            touched = {policy for policy, _ in result.operations.get(evaluation.resource.describe(), [])}
            assert touched <= mutating
            left = [(f.policy, f.rule, f.message) for f in evaluation.findings
                    if f.policy in touched and f.result == "fail"]
            assert not left, f"{result.path}: {evaluation.resource.describe()}: {left}"
    second = fix_paths(engine, [str(root)], write=False)
    assert not [r.path for r in second if r.changed], "a second fix changed something"
