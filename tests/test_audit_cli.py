"""`aiadmit audit` end to end through the real console script: formats, lines, errors, exit codes."""

import json
import os
import subprocess
import sys

import pytest

from testdata import CORPUS  # tests/data/corpus, in the repository

GPU_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: gpu
  namespace: ml
spec:
  containers:
    - name: main
      image: registry.example/serve:v1
      resources:
        limits:
          nvidia.com/gpu: 1
"""

MALFORMED = """\
apiVersion: v1
kind: Pod
metadata: {name: broken, namespace: ml}
spec:
  containers: nginx
---
apiVersion: v1
kind: Pod
metadata: {name: bad-quantity, namespace: ml}
spec:
  containers:
    - name: main
      image: img
      resources:
        limits: {memory: lots, nvidia.com/gpu: 1}
---
""" + GPU_POD


def aiadmit(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "webhook", *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def test_text_output_is_file_line_col_id_action_message(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(GPU_POD)
    result = aiadmit("audit", str(path))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert f"{path}:10:7: resources-declared [deny] container main must request a non-zero cpu " \
           f"(resources.requests.cpu; a limit alone counts too: the API server copies it into the missing " \
           f"request); or request it for the whole pod (spec.resources.requests.cpu, pod-level resources)" in lines
    assert lines[-1].startswith("1 resources checked (")
    assert "Traceback" not in result.stderr


def test_json_output_contract(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text(GPU_POD)
    result = aiadmit("audit", "--format", "json", str(path))
    document = json.loads(result.stdout)
    assert set(document) >= {"findings", "errors", "summary"}
    finding = next(f for f in document["findings"] if f["rule"] == "memory-limit")
    assert finding == {
        "policy": "resources-declared", "rule": "memory-limit", "action": "deny", "result": "fail",
        "message": "container main must set a memory limit (resources.limits.memory, or spec.resources.limits.memory "
                   "for the whole pod)",
        "resource": {"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "gpu"},
        "file": str(path), "line": 11, "column": 9,
        "path": "/spec/containers/0/resources/limits/memory",
    }


def test_malformed_documents_are_errors_with_lines_and_the_rest_is_still_checked(tmp_path):
    path = tmp_path / "mixed.yaml"
    path.write_text(MALFORMED)
    result = aiadmit("audit", "-f", "json", str(path))
    assert result.returncode == 2
    document = json.loads(result.stdout)
    errors = {(e["line"], e["message"]) for e in document["errors"]}
    assert (5, "spec.containers: containers must be a list, not str") in errors
    assert (15, "spec.containers[0].resources.limits.memory: 'lots' is not a Kubernetes quantity") in errors
    # One bad field is an error for that field: the rest of its resource is still checked (issue 14).
    assert {f["resource"]["name"] for f in document["findings"]} == {"gpu", "bad-quantity"}
    assert not [f for f in document["findings"] if f["path"].endswith("/limits/memory")
                and f["resource"]["name"] == "bad-quantity"]
    assert "Traceback" not in result.stderr


def test_stdin_and_exit_zero_when_clean():
    clean = GPU_POD.replace("nvidia.com/gpu: 1", "cpu: 1")
    result = aiadmit("audit", "-", stdin=clean)
    assert result.returncode == 0, result.stdout
    assert "1 resources checked (0 denied, 0 warned, 0 audit only, 1 passed, 0 no policy applied); findings: 0 deny" \
        in result.stdout


def test_yaml_syntax_error_is_exit_2_with_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: [x\n")
    result = aiadmit("audit", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith(f"{path}:4:1: error: YAML:")


def test_usage_errors_are_exit_2(tmp_path):
    assert aiadmit("audit").returncode == 2
    assert aiadmit("audit", "--policy", "no-such-policy", str(tmp_path)).returncode == 2
    bad_config = tmp_path / "config.yaml"
    bad_config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\npolicies:\n  shm-sized: {action: block}\n")
    result = aiadmit("audit", "--config", str(bad_config), str(tmp_path))
    assert result.returncode == 2
    assert f"{bad_config}:4:15: error: policies.shm-sized.action: 'block' is not one of" in result.stderr


def test_missing_file_is_an_error(tmp_path):
    result = aiadmit("audit", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2 and f"{tmp_path / 'nope.yaml'}:0:0: error: cannot read file" in result.stderr


def test_non_ai_workloads_get_nothing_but_devices_declared(tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text("""\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: nginx
          image: nginx:latest
""")
    document = json.loads(aiadmit("audit", "-f", "json", str(path)).stdout)
    assert {f["policy"] for f in document["findings"]} <= {"devices-declared"}


def test_whole_corpus_without_a_crash():
    result = aiadmit("audit", "-f", "json", CORPUS)
    document = json.loads(result.stdout)
    assert "Traceback" not in result.stderr
    assert document["summary"]["resources"] > 100
    # The one file that is not valid YAML is the only error, and it names its line.
    assert [(os.path.basename(e["file"]), e["line"]) for e in document["errors"]] == [
        ("ai-ml__gke-model-armor__preparing-the-model__vllm-gemma-deployment.yaml", 37)]
    assert not [f for f in document["findings"] if f["result"] == "error"], "rules that failed to evaluate"


FREEZE_PROBE = """\
import gc, sys
from webhook.app import cli
before = gc.get_freeze_count()
if sys.argv[1] == "main":
    code = cli.main(["audit", sys.argv[2]])
    print(code, gc.get_freeze_count() - before, gc.isenabled())
else:
    import atexit
    atexit.register(lambda: print(gc.get_freeze_count() > before, gc.isenabled(), file=sys.stderr))
    sys.argv = ["aiadmit", "audit", sys.argv[2]]
    cli.entry()
"""


@pytest.mark.parametrize("how", ["main", "entry"])
def test_only_the_audit_process_freezes_its_objects(tmp_path, how):
    """The console script ends after the report, so it may freeze what the audit built out of the collector's reach;
    an in-process caller (cli.main: tests, embedding) goes on, and gets nothing frozen for good and the collector
    back on."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(GPU_POD)
    done = subprocess.run([sys.executable, "-c", FREEZE_PROBE, how, str(pod)], capture_output=True, text=True,
                          timeout=120)
    if how == "main":
        assert done.stdout.splitlines()[-1].split() == ["1", "0", "True"], done.stdout
    else:
        assert done.returncode == 1, done.stderr
        assert done.stderr.split()[-2:] == ["True", "True"], done.stderr
