"""Issue 14: no silent passes, and one bad field never switches off the checks of the rest of its object.

Each test runs the real CLI (`python3 -m webhook audit`) on a small manifest and reads its JSON report.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PLACEHOLDER_JOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: ddp, namespace: ml}
spec:
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: pytorch
              image: registry.example/train:v1
              resources:
                limits: {nvidia.com/gpu: $GPU_PER_NODE, memory: 64Gi}
"""


def audit(*args, stdin=None):
    result = subprocess.run([sys.executable, "-m", "webhook", "audit", "-f", "json", *args], input=stdin,
                            capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else None


def test_a_placeholder_quantity_is_an_error_for_that_field_and_the_rest_is_checked(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(PLACEHOLDER_JOB)
    code, report = audit(str(path))
    assert code == 2
    assert [(e["line"], e["message"]) for e in report["errors"]] == [
        (14, "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.nvidia.com/gpu: "
             "'$GPU_PER_NODE' is not a Kubernetes quantity")]
    rules = {(f["policy"], f["rule"]) for f in report["findings"]}
    # still an accelerated training job: the device's name classifies it even though its count is unreadable
    assert ("shm-sized", "mounted") in rules or ("priority-class", "set") in rules
    assert ("resources-declared", "cpu-request") in rules
    assert not [f for f in report["findings"] if "nvidia.com~1gpu" in f["path"]]


def test_a_bad_list_field_is_an_error_and_the_other_containers_are_checked(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text("""\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers:
    - name: a
      image: x
      env: "NAME=value"
      resources: {limits: {nvidia.com/gpu: 1}}
""")
    code, report = audit(str(path))
    assert code == 2
    assert [e["line"] for e in report["errors"]] == [8]
    assert "env must be a list" in report["errors"][0]["message"]
    assert {"resources-declared", "shm-sized"} <= {f["policy"] for f in report["findings"]}


@pytest.mark.parametrize("text, line, message", [
    ("apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: d}\nspec: {}\n", 2,
     "kind 'Deploymnet' is not a kind of API group apps: did you mean 'Deployment'?"),
    ("apiVersion: kubeflow.org/v1\nkind: pytorchjob\nmetadata: {name: d}\nspec: {}\n", 2,
     "kind 'pytorchjob' is not a kind of API group kubeflow.org: did you mean 'PyTorchJob'?"),
    ("apiVersion: v1\nKind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: x}]}\n", 2,
     "key 'Kind' must be spelt 'kind': Kubernetes field names are case-sensitive"),
    ("apiVersion: apps/v1\nmetadata: {name: d}\nspec: {}\n", 1, "apiVersion 'apps/v1' without a kind"),
    ("metadata: {name: d}\nspec: {template: {spec: {containers: [{name: a, image: x}]}}}\n", 1,
     "a Kubernetes object needs apiVersion and kind; this one has neither"),
    ("kind: Deployment\nmetadata: {name: d}\nspec: {}\n", 1, "kind Deployment without an apiVersion"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: a, image: x}]\n"
     "  containers: []\n", 6, "YAML: duplicate key 'containers'"),
])
def test_broken_identity_and_duplicate_keys_are_input_errors_with_lines(tmp_path, text, line, message):
    path = tmp_path / "object.yaml"
    path.write_text(text + "---\n" + GOOD_POD)
    code, report = audit(str(path))
    assert code == 2
    assert [(e["file"], e["line"]) for e in report["errors"]] == [(str(path), line)]
    assert message in report["errors"][0]["message"]
    assert report["summary"]["resources"] == 1  # the other document of the file is still checked


GOOD_POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec: {containers: [{name: a, image: x}]}\n"


def test_an_empty_stdin_is_an_error_not_a_clean_input():
    code, report = audit("-", stdin="")
    assert code == 2
    assert report["errors"] == [{"file": "<stdin>", "line": 0, "message":
                                 "empty input: no YAML document in it (did the command that should have written "
                                 "it fail?)"}]


def test_real_kinds_of_other_groups_and_tools_configuration_stay_quiet(tmp_path):
    path = tmp_path / "misc.yaml"
    path.write_text("replicaCount: 2\nimage: {repository: x}\n---\n"  # a values file
                    "apiVersion: serving.kserve.io/v1alpha1\nkind: LLMInferenceServiceConfig\nmetadata: {name: c}\n"
                    "spec: {}\n---\napiVersion: v1\nkind: ConfigMapList\nitems: []\n---\n"
                    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n")
    code, report = audit(str(path))
    assert code == 0 and report["errors"] == []


UNLISTED = """\
apiVersion: example.com/v1
kind: TrainingTask
metadata: {name: tt, namespace: ml}
spec:
  tasks:
    - name: worker
      replicas: 4
      template:
        spec:
          containers:
            - name: trainer
              image: registry.example/train:v1
              resources: {limits: {nvidia.com/gpu: 8}}
  extra:
    replicaSpecs:
      Launcher:
        template:
          spec:
            containers: [{name: launcher, image: registry.example/launch:v1}]
"""


def test_an_unlisted_kind_with_pod_templates_is_checked_and_says_it_was_found_by_shape(tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text(UNLISTED)
    code, report = audit(str(path))
    assert code == 1
    findings = report["findings"]
    assert {f["path"].split("/containers/")[0] for f in findings if "/containers/" in f["path"]} == {
        "/spec/tasks/0/template/spec", "/spec/extra/replicaSpecs/Launcher/template/spec"}
    assert all("[TrainingTask (example.com) is not in the kinds table: this pod template was found by its shape]"
               in f["message"] for f in findings)
    assert any("TrainingTask (example.com) is not in the kinds table; checked the 2 pod template(s) found by shape"
               in note for note in report["notes"])
    shm = [f for f in findings if f["policy"] == "shm-sized"]
    assert shm and all("trainer" in f["message"] for f in shm)  # the launcher holds no device


def test_identity_errors_point_at_line_and_column_of_the_key(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text("apiVersion: v1\nmetadata: {name: p}\n  \nKind: Pod\n")
    result = subprocess.run([sys.executable, "-m", "webhook", "audit", str(path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith(f"{path}:4:1: error: key 'Kind' must be spelt 'kind'")
