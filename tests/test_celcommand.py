"""`aiadmit cel`: one expression, checked with a level's declarations and a policy's params, run over an object."""

import copy
import json
import os
import subprocess
import sys

import pytest
import yaml

from testdata import ROOT
from webhook.app.cli import main

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
       "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v1",
                                "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "48Gi"}}}]}}


def _object(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(POD))
    return str(path)


def test_a_value_is_printed(tmp_path, capsys):
    code = main(["cel", 'quantity(container.resources.limits.memory).isGreaterThan(quantity("1Gi"))',
                 "--object", _object(tmp_path)])
    assert code == 0 and capsys.readouterr().out.strip() == "true"


def test_a_load_error_names_its_column_with_a_caret(tmp_path, capsys):
    assert main(["cel", "has(contaner.name)", "--object", _object(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("<expression>:1:5: error: undeclared reference to 'contaner'")
    assert err.splitlines()[2] == "      ^"


def test_a_policy_rule_gives_its_params_and_level(tmp_path, capsys):
    code = main(["cel", "[template, params.volumeName]", "--object", _object(tmp_path),
                 "--policy", "policies/shm-sized.yaml", "--rule", "fits-memory-limit"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)[0] == "pod"
    assert main(["cel", "container.name", "--object", _object(tmp_path), "--policy", "policies/gang-admission.yaml",
                 "--level", "object"]) == 2  # no container at the object level: a load error


def test_an_evaluation_error_exits_1(tmp_path, capsys):
    assert main(["cel", "container.nope", "--object", _object(tmp_path)]) == 1
    assert "no such key: nope" in capsys.readouterr().err


# ---------------------------------------------------------------- a policy's named variables, through the real CLI
# A rule of a built-in policy copied into `aiadmit cel` must give the answer the engine gives in an audit: checked
# with the policy's variables visible at its level, run with them bound (lazily) as in a review.

def _cli(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)


def _rule(policy: str, name: str) -> dict:
    with open(os.path.join(ROOT, "policies", policy), encoding="utf-8") as handle:
        return next(r for r in yaml.safe_load(handle)["rules"] if r["name"] == name)


def _gpu_pod(size_limit: str) -> dict:
    pod = copy.deepcopy(POD)
    pod["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size_limit}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return pod


def _pytorchjob(queue: bool) -> dict:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "train:1",
                                         "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    meta = {"name": "train", "namespace": "ml"}
    if queue:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": "gpu"}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta,
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                             "Worker": {"replicas": 3, "template": copy.deepcopy(template)}}}}


CASES = [  # (policy, rule, object, whether the engine reports the rule failing on it)
    ("shm-sized.yaml", "fits-memory-limit", _gpu_pod("64Gi"), True),
    ("shm-sized.yaml", "fits-memory-limit", _gpu_pod("8Gi"), False),
    ("gang-admission.yaml", "gang-admitted", _pytorchjob(queue=False), True),
    ("gang-admission.yaml", "gang-admitted", _pytorchjob(queue=True), False),
]


@pytest.mark.parametrize("policy,rule,obj,fails", CASES,
                         ids=[f"{c[1]}-{'fail' if c[3] else 'pass'}" for c in CASES])
def test_a_rule_reading_variables_answers_as_the_engine(tmp_path, policy, rule, obj, fails):
    path = tmp_path / "object.json"
    path.write_text(json.dumps(obj))
    raw = _rule(policy, rule)
    assert "variables." in raw["expression"]  # the point of the test: the rule reads the policy's variables
    audit = _cli("audit", "-f", "json", "--policies", f"policies/{policy}", str(path))
    findings = [f for f in json.loads(audit.stdout)["findings"] if f["rule"] == rule]
    assert [f["result"] for f in findings] == (["fail"] if fails else []), audit.stdout + audit.stderr
    answers = []
    for source in (raw.get("when"), raw["expression"]):
        if source is not None:
            done = _cli("cel", source, "--object", str(path), "--policy", f"policies/{policy}", "--rule", rule)
            assert done.returncode == 0, done.stderr
            answers.append(json.loads(done.stdout))
    applies, passes = all(answers[:-1]), answers[-1]
    assert (applies and passes is False) == fails  # the engine's finding: the rule applies and its expression fails


def test_a_variable_prints_its_value(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(_gpu_pod("8Gi")))
    done = _cli("cel", "variables.memoryLimit", "--policy", "policies/shm-sized.yaml", "--object", str(path),
                "--container", "vllm")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 48 * 2 ** 30  # a quantity: its value in base units, as aiadmit carries it
    done = _cli("cel", "variables.sizedShmVolumes.map(v, v.emptyDir.sizeLimit)", "--policy",
                "policies/shm-sized.yaml", "--object", str(path))
    assert done.returncode == 0 and json.loads(done.stdout) == ["8Gi"], done.stderr


def test_a_misspelt_variable_fails_with_its_column(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(_gpu_pod("8Gi")))
    done = _cli("cel", "variables.holdsDevice && variables.memoryLimt", "--policy", "policies/shm-sized.yaml",
                "--object", str(path))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[0].startswith("<expression>:1:36: error: variables has no field 'memoryLimt'"), done.stderr
    assert lines[2] == " " * 37 + "^"  # under the field's first letter (two spaces of indent, column 36)


def test_a_variable_of_a_deeper_level_is_not_visible(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(_gpu_pod("8Gi")))
    done = _cli("cel", "variables.memoryLimit", "--policy", "policies/shm-sized.yaml", "--object", str(path),
                "--level", "pod")
    assert done.returncode == 2
    assert "variable 'memoryLimit' reads the container level: not visible at level pod" in done.stderr


def test_a_multi_line_expression_locates_its_error_on_its_line(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(_gpu_pod("8Gi")))
    done = _cli("cel", "variables.holdsDevice &&\n  variables.memoryLimt", "--policy", "policies/shm-sized.yaml",
                "--object", str(path))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[0].startswith("<expression>:2:13: error: variables has no field"), done.stderr
    assert lines[1:3] == ["    variables.memoryLimt", " " * 14 + "^"]


def test_a_container_the_policy_does_not_check_is_said(tmp_path):
    # KServe's `model` container is not in `containers`: shm-sized (containers: containers) never runs on it
    inference = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                 "metadata": {"name": "llm", "namespace": "ml"},
                 "spec": {"predictor": {"model": {"modelFormat": {"name": "huggingface"}, "resources": {
                     "limits": {"nvidia.com/gpu": "1", "memory": "24Gi"}}}}}}
    path = tmp_path / "isvc.json"
    path.write_text(json.dumps(inference))
    done = _cli("cel", "variables.holdsDevice", "--policy", "policies/shm-sized.yaml", "--object", str(path))
    assert done.returncode == 0 and done.stdout.strip() == "true", done.stderr
    assert "does not check container model (model): a review never runs its container rules on it" in done.stderr
    audit = _cli("audit", "-f", "json", "--policies", "policies/shm-sized.yaml", str(path))
    assert json.loads(audit.stdout)["findings"] == []  # which is why the note is there
