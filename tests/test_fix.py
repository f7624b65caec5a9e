"""`aiadmit fix`: the webhook's own patch, written into the YAML with everything else kept.

The corpus round trip is generic over whatever policies mutate today: it asks
the engine, not a list in this file.
"""

import base64
import json
import os
import re
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
from webhook.outputs.fix import fix_paths, fix_text, split_documents
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
    assert re.search(re.escape(f"{tmp_path / 'chart.yaml'}:5:") + r"\d+: warning: skipped template \(contains "
                     r"'\{\{ \}\}'\): render it first", result.stderr), result.stderr
    assert "1 skipped" in result.stderr
    assert aiadmit("fix", "-").returncode == 2


def test_diff_previews_and_writes_nothing(tmp_path):
    """ruff's and black's convention: `fix` writes, `fix --diff` only shows (and exits 1 when it would change)."""
    path = tmp_path / "pod.yaml"
    path.write_text(POD)
    before = os.stat(path).st_mtime_ns
    diff = aiadmit("fix", "--diff", "--policy", "shm-sized", str(path))
    assert diff.returncode == 1, diff.stderr
    assert path.read_text() == POD and os.stat(path).st_mtime_ns == before
    assert diff.stdout.startswith(f"--- {path}\n+++ {path}\n@@ ") and "would fix Pod ml/trainer" in diff.stderr
    assert aiadmit("fix", "--policy", "shm-sized", str(path)).returncode == 0 and path.read_text() == EXPECTED
    again = aiadmit("fix", "--diff", "--policy", "shm-sized", str(path))
    assert again.returncode == 0 and again.stdout == ""


POD_JSON = """\
{
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer", "namespace": "ml", "labels": {"z": "1", "a": "2"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "registry.example/train:v1",
                "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "32Gi"}}
            }
        ]
    }
}
"""

POD_JSON_FIXED = """\
{
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer", "namespace": "ml", "labels": {"z": "1", "a": "2"}},
    "spec": {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "registry.example/train:v1",
                "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "32Gi"}},
                "volumeMounts": [
                    {
                        "name": "dshm",
                        "mountPath": "/dev/shm"
                    }
                ]
            }
        ],
        "volumes": [
            {
                "name": "dshm",
                "emptyDir": {
                    "medium": "Memory",
                    "sizeLimit": "8Gi"
                }
            }
        ]
    }
}
"""


def test_json_stays_json_with_key_order_and_indentation(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(POD_JSON)
    result = aiadmit("fix", "--policy", "shm-sized", str(path))
    assert result.returncode == 0, result.stderr
    assert path.read_text() == POD_JSON_FIXED
    assert list(json.loads(path.read_text())["metadata"]["labels"]) == ["z", "a"]
    assert aiadmit("fix", "--check", "--policy", "shm-sized", str(path)).returncode == 0


def test_one_line_json_stays_one_line_json(engine, tmp_path):
    document = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(document))
    (result,) = fix_paths(engine, [str(path)], policies={"shm-sized"})
    assert result.changed and not result.errors
    text = path.read_text()
    assert "\n" not in text and text.startswith(json.dumps(document)[:-40])
    fixed = json.loads(text)
    assert fixed["spec"]["volumes"][0]["name"] == "dshm" and fixed["spec"]["containers"][0]["volumeMounts"]


FOUR = """\
apiVersion: v1
kind: Pod
metadata:
    name: trainer
spec:
    containers:
        -   name: main
            image: registry.example/train:v1
            resources:
                limits:
                    nvidia.com/gpu: 1
    restartPolicy: Never
"""

FOUR_FIXED = """\
apiVersion: v1
kind: Pod
metadata:
    name: trainer
spec:
    containers:
        -   name: main
            image: registry.example/train:v1
            resources:
                limits:
                    nvidia.com/gpu: 1
            volumeMounts:
                -   name: dshm
                    mountPath: /dev/shm
    restartPolicy: Never
    volumes:
        -   name: dshm
            emptyDir:
                medium: Memory
                sizeLimit: 1Gi
"""


FOUR_AT_KEY = """\
spec:
    containers:
    -   name: main
        image: registry.example/train:v1
        resources:
            limits:
                nvidia.com/gpu: 1
    restartPolicy: Never
"""

FOUR_AT_KEY_FIXED = """\
spec:
    containers:
    -   name: main
        image: registry.example/train:v1
        resources:
            limits:
                nvidia.com/gpu: 1
        volumeMounts:
        -   name: dshm
            mountPath: /dev/shm
    restartPolicy: Never
    volumes:
    -   name: dshm
        emptyDir:
            medium: Memory
            sizeLimit: 1Gi
"""

FOUR_ONE_SPACE = """\
spec:
    containers:
        - name: main
          image: registry.example/train:v1
          resources:
              limits:
                  nvidia.com/gpu: 1
    restartPolicy: Never
"""

FOUR_ONE_SPACE_FIXED = """\
spec:
    containers:
        - name: main
          image: registry.example/train:v1
          resources:
              limits:
                  nvidia.com/gpu: 1
          volumeMounts:
              - name: dshm
                mountPath: /dev/shm
    restartPolicy: Never
    volumes:
        - name: dshm
          emptyDir:
              medium: Memory
              sizeLimit: 1Gi
"""

HEAD = "apiVersion: v1\nkind: Pod\nmetadata:\n    name: trainer\n"


@pytest.mark.parametrize("original, expected", [
    (FOUR, FOUR_FIXED), (HEAD + FOUR_AT_KEY, HEAD + FOUR_AT_KEY_FIXED), (HEAD + FOUR_ONE_SPACE, HEAD + FOUR_ONE_SPACE_FIXED),
], ids=["indented dashes", "dashes at the key's column", "dash plus one space"])
def test_yaml_indentation_style_is_kept(engine, tmp_path, original, expected):
    """A consistently 4-space file keeps its list items where they were, and the additions follow its style."""
    path = tmp_path / "pod.yaml"
    path.write_text(original)
    (result,) = fix_paths(engine, [str(path)], policies={"shm-sized"})
    assert not result.errors, result.errors
    assert path.read_text() == expected, path.read_text()


@pytest.mark.parametrize("indent, newline", [("\t", "\n"), (2, "\r\n"), (3, "\n")], ids=["tabs", "crlf", "three"])
def test_json_keeps_tabs_crlf_and_odd_indents(engine, tmp_path, indent, newline):
    document = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ü-pod", "annotations": {"note": "héllo ✓"}},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    text = json.dumps(document, indent=indent, ensure_ascii=False).replace("\n", newline) + newline
    path = tmp_path / "pod.json"
    path.write_bytes(text.encode("utf-8"))
    (result,) = fix_paths(engine, [str(path)], policies={"shm-sized"})
    assert result.changed and not result.errors, result.errors
    fixed = path.read_bytes().decode("utf-8")
    expected = json.loads(text)
    expected["spec"]["containers"][0]["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    expected["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    # exactly what json.dumps writes for the patched object with the file's own indentation and line ends
    assert fixed == json.dumps(expected, indent=indent, ensure_ascii=False).replace("\n", newline) + newline


GPU_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: serve
  namespace: ml
spec:
  replicas: 1
  selector:
    matchLabels: {app: serve}
  template:
    metadata:
      labels: {app: serve}
    spec:
      containers:
      - name: main
        image: registry.example/serve:v1
        resources:
          limits:
            nvidia.com/gpu: 1
"""
PRIORITY_CLASS = "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: ai-inference\nvalue: 900000\n"


def test_fix_does_not_invent_priority_classes_unless_told_the_cluster_has_them(engine):
    offline = fix_text(engine, GPU_DEPLOYMENT, "d.yaml")
    assert "priorityClassName" not in offline.fixed  # no such class in the input: not written
    assert offline.changed  # the other mutations (the /dev/shm volume) still are
    [warning] = [w for w in offline.warnings if "priorityClassName" in w.message]
    assert "'ai-inference' not written" in warning.message and "--assume-priority-classes" in warning.message
    assert warning.line == 13  # the pod spec the class would be written into
    assumed = fix_text(engine, GPU_DEPLOYMENT, "d.yaml", assume_priority_classes=True)
    assert "priorityClassName: ai-inference" in assumed.fixed
    assert not [w for w in assumed.warnings if "priorityClassName" in w.message]
    defined = fix_text(engine, GPU_DEPLOYMENT + PRIORITY_CLASS, "d.yaml")  # the input defines the class
    assert "priorityClassName: ai-inference" in defined.fixed
    assert not [w for w in defined.warnings if "priorityClassName" in w.message]


# ------------------------------------------------------------------------------------------------ safe reading
# `fix DIR` reads through the audit's reader (issue 21): what would block or never end is reported, and the rest of
# the directory is still fixed.
def _fix_in_thread(engine, paths, seconds=20):
    import threading

    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(r=fix_paths(engine, paths, policies={"shm-sized"})),
                              daemon=True)
    worker.start()
    worker.join(seconds)
    return worker, outcome


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fix_of_a_directory_with_a_fifo_does_not_block_and_fixes_the_rest(engine, tmp_path):
    os.mkfifo(tmp_path / "a-pipe.yaml")
    (tmp_path / "pod.yaml").write_text(POD)
    worker, outcome = _fix_in_thread(engine, [str(tmp_path)])
    if worker.is_alive():  # unblock the reader so the test process can end
        with open(tmp_path / "a-pipe.yaml", "w"):
            pass
        pytest.fail("a FIFO named a-pipe.yaml blocked `fix`")
    by_name = {os.path.basename(r.path): r for r in outcome["r"]}
    assert "not a regular file (a FIFO)" in by_name["a-pipe.yaml"].errors[0].message
    assert by_name["pod.yaml"].changed and "/dev/shm" in (tmp_path / "pod.yaml").read_text()


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_fix_does_not_follow_a_symlink_to_dev_zero(engine, tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.yaml")
    (tmp_path / "pod.yaml").write_text(POD)
    worker, outcome = _fix_in_thread(engine, [str(tmp_path)])
    assert not worker.is_alive(), "reading zero.yaml -> /dev/zero did not end"
    by_name = {os.path.basename(r.path): r for r in outcome["r"]}
    assert "not a regular file (a character device)" in by_name["zero.yaml"].errors[0].message
    assert os.path.islink(tmp_path / "zero.yaml")  # nothing written through the link
    assert by_name["pod.yaml"].changed


def test_fix_cli_names_the_fifo_and_exits_2(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "webhook", "fix", str(fifo)], capture_output=True, text=True,
                          timeout=30, cwd=os.path.dirname(HERE), env={**os.environ, "PYTHONPATH": os.path.dirname(HERE)})
    assert done.returncode == 2 and "not a regular file" in done.stdout + done.stderr
