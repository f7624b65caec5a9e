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
