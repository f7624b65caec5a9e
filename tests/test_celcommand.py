"""`aiadmit cel`: one expression, checked with a level's declarations and a policy's params, run over an object."""

import json

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
    assert err.startswith("<expression>:1:5: undeclared reference to 'contaner'")
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
