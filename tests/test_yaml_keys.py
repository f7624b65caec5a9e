"""Map keys as Kubernetes reads them: every key a string, spelt as sigs.k8s.io/yaml spells it, or an input error.

A key PyYAML leaves an int, a bool or None (`pytorchReplicaSpecs: {1: ...}`, `yes:`) was skipped by every walk over
names, so the template under it was never checked: a silent pass. Kubernetes (kubectl, the API server) converts the
YAML to JSON with sigs.k8s.io/yaml, where a key is a string or the document is refused; aiadmit's reader now does
the same (webhook/model/yamlkeys.py), and tests/tools/yamljson, a Go build of sigs.k8s.io/yaml itself, is the judge.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from webhook.inputs.sources import load_text
from yamljson import aiadmit_reads, yamljson  # noqa: F401  (yamljson: the fixture)

ROOT = Path(__file__).resolve().parent.parent
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keys}\ndata:\n  %s: v\n"
FALLBACK = CONFIGMAP + "  <<: {when: 1}\n"  # a merge key: the document is built by PyYAML's constructor instead

KEYS = ["1", "-1", "+5", "0x1F", "0X1f", "017", "08", "0o17", "0O17", "0b101", "0B101", "0b_1", "-0b11", "0b-101",
        "0b+101", "-0b-1", "1_000", "1__0", "1_", "_1", "1:30", "1e3", "1E5", "1e+5", "1e-5", "1.e5", "1.5", "1.0",
        "1.", "0.1", "0.0", "-0", "-0.0", "00", "0e0", "3.14159265358979", "1000000.0", "100000.0", "1234567.0",
        "123456.7", "0.000123", "16777217", ".5", "+.5", "-.5e3", ".5_5", ".5e1_0", "._5", ".", "+", "-", "1e", "0x",
        "0x1p3", "1e400", "1e-400", ".5e-400", "1e39", "-1e39", "3.4028236e38", "1.5e-45", "1e-46",
        "1.7976931348623157e308", "9223372036854775807", "-9223372036854775808", "-0x8000000000000000",
        "9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
        "99999999999999999999", "0777777777777777777777",
        "0b1111111111111111111111111111111111111111111111111111111111111111",
        ".inf", "-.inf", "+.INF", ".NaN", ".nan", "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y",
        "Y", "n", "N", "no", "No", "off", "OFF", "false", "~", "null", "Null", "NULL", "2001-12-14",
        "2001-12-14 21:59:43.10", "=", "'1'", '"1"', "'yes'", '"~"', "!!str 1", "!!int \"1\"", "!!float 1",
        "!!bool \"true\"", "!!binary aGVsbG8=", "Worker", "nvidia.com/gpu", "name", "n1", "y2", "yes please", "10-a.conf",
        "1.2.3", "0.0.0.0/0", "1-2"]


def _random_keys() -> list[str]:
    draw = random.Random(20261207)
    keys = []
    for _ in range(150):
        keys.append(f"{draw.uniform(-1e7, 1e7):.{draw.randint(1, 17)}g}")
        keys.append(f"{draw.randint(1, 99999)}e{draw.randint(-50, 45)}")
        keys.append(f"{draw.choice(['', '-', '+'])}{draw.randint(0, 1 << draw.randint(1, 70))}")
        keys.append(f"0.{draw.randint(0, 10 ** 12):0{draw.randint(1, 14)}d}")
    return keys


def _ours(text: str) -> tuple[object, str]:
    """(the `data` map as aiadmit reads it, less its `when`, or None; the input error's text, or "")."""
    data, error = aiadmit_reads(text, "keys.yaml")
    return (None if data is None else {k: v for k, v in data.items() if k != "when"}), error


@pytest.mark.parametrize("shape", [CONFIGMAP, FALLBACK], ids=["node-walk", "pyyaml-constructor"])
def test_keys_are_what_sigs_k8s_io_yaml_makes_of_them(yamljson, shape):
    keys = KEYS + _random_keys()
    texts = [shape % key for key in keys]
    mismatches = []
    for key, text, answer in zip(keys, texts, yamljson(texts)):
        ours, error = _ours(text)
        if answer.get("error"):
            if not error.startswith("keys.yaml:5:3: YAML: ") or "refuses" not in error:
                mismatches.append((key, answer["error"], ours or error))
            continue
        (theirs,) = answer["json"]
        expected = {k: v for k, v in theirs["data"].items() if k != "when"}
        if ours != expected:
            mismatches.append((key, expected, ours or error))
    assert not mismatches


def test_a_str_tag_or_an_anchor_on_a_key_is_read_as_kubernetes_reads_it(yamljson):
    """`!!str y` is "y" to Kubernetes, `&a y` is "true". The loader resolves every plain scalar as go-yaml does
    (anchored or not), so a key tagged `str` is a string to Kubernetes too: on main `!!str y` was refused, since
    PyYAML's tags could not tell it from a plain `y` PyYAML had read as a string."""
    texts = [CONFIGMAP % "!!str y", CONFIGMAP % "&a y", CONFIGMAP % "!!str 08", CONFIGMAP % "&b 08"]
    theirs = [a["json"][0]["data"] for a in yamljson(texts)]
    assert theirs == [{"y": "v"}, {"true": "v"}, {"08": "v"}, {"8": "v"}]
    assert [_ours(text) for text in texts] == [(data, "") for data in theirs]


@pytest.mark.parametrize("key, message, column", [
    ("~", "null map key '~'", 3), ("null", "null map key 'null'", 3), ("18446744073709551615", "past int64", 3),
    ("? [a]\n  ", "a sequence as a map key", 5), ("? {a: b}\n  ", "a map as a map key", 5)])
def test_keys_kubernetes_refuses_are_input_errors(yamljson, key, message, column):
    text = CONFIGMAP % key
    (answer,) = yamljson([text])
    assert answer["json"] is None and answer["strictJSON"] is None  # YAMLToJSON fails: kubectl and the API server
    ours, error = _ours(text)
    assert ours is None and error.startswith(f"keys.yaml:5:{column}: YAML: ") and message in error


@pytest.mark.parametrize("first, second", [("1", '"1"'), ('"1"', "1"), ("y", "'true'"), ("1.0", "1"),
                                           ("yes", "true"), ("0x10", "16")])
def test_keys_that_collide_once_converted_are_input_errors(yamljson, first, second):
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: keys}\ndata:\n" f"  {first}: a\n  {second}: b\n"
    (answer,) = yamljson([text])
    if answer["json"] and len(answer["json"]) == 2:  # a different text, one key: Kubernetes keeps either at random
        assert answer["strictJSON"] == answer["json"]  # and its strict mode (field validation) does not notice
    else:  # the same value twice to go-yaml: its strict mode refuses, the lax one keeps the last
        assert "already set in map" in answer["strictError"]
    ours, error = _ours(text)
    assert ours is None and error.startswith("keys.yaml:6:3: YAML: duplicate key ")


PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: keyed
  namespace: ml
spec:
  pytorchReplicaSpecs:
    %s:
      replicas: 1
      template:
        spec:
          containers:
            - name: trainer
              image: pytorch/pytorch:2.5.1
"""


def _audit(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "webhook", "audit", "-f", "json", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("key, name", [("1", "1"), ("yes", "true"), ("0x1F", "31"), ("1.5", "1.5")])
def test_a_pod_template_under_a_non_string_key_is_checked(tmp_path, key, name):
    """On main a PyTorchJob whose replica type is `1:` (or `yes:`) passed: its template was never walked."""
    done = _audit(tmp_path, PYTORCHJOB % key)
    report = json.loads(done.stdout)
    denied = [f for f in report["findings"] if f["action"] == "deny" and f["policy"] == "resources-declared"]
    assert done.returncode == 1 and denied and not report["errors"], done.stdout
    assert {(f["line"], f["column"]) for f in denied} == {(13, 15)}  # the container, found through the converted key
    assert all(f["path"].startswith(f"/spec/pytorchReplicaSpecs/{name}/template/") for f in denied)


def test_a_refused_key_in_a_workload_is_an_input_error_with_its_position(tmp_path):
    done = _audit(tmp_path, PYTORCHJOB % "~")
    assert done.returncode == 2
    assert f"{tmp_path / 'job.yaml'}:8:5: error: YAML: null map key '~'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_duplicate_made_by_conversion_in_a_workload_is_an_input_error(tmp_path):
    text = PYTORCHJOB % "1" + "    '1':\n      replicas: 2\n"
    done = _audit(tmp_path, text)
    assert done.returncode == 2
    assert (f"{tmp_path / 'job.yaml'}:15:5: error: YAML: duplicate key '1': `'1'` here and `1` on line 8 are one "
            "key to Kubernetes (sigs.k8s.io/yaml), which keeps one of the two values at random") in done.stderr


def test_a_cluster_object_rendered_for_positions_reads_back_with_the_same_keys():
    """Policy objects are rendered as kubectl prints them and read back for line:col: a key `y` or `08` is written
    quoted (as go-yaml's writer quotes it), else the reader would spell it "true" or "8"."""
    from webhook.language.objects import render

    obj = {"apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyException",
           "metadata": {"name": "x", "namespace": "n", "labels": {"y": "1", "08": "n", "1e3": "on", "a": "b"}},
           "spec": {"policies": ["p"], "reason": "r", "requestedBy": "me"}}
    (resource,) = load_text(render(obj), "PolicyException/n/x").resources
    assert resource.obj == obj
