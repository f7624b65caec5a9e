"""Plain booleans as Kubernetes reads them: `y`, `Y`, `n`, `N` are true and false to go-yaml v2, strings to PyYAML.

kubectl and the API server read YAML with sigs.k8s.io/yaml over go.yaml.in/yaml/v2, which resolves the plain
scalars `y Y n N` as booleans (YAML 1.1 as go-yaml has it); PyYAML reads them as strings. On main a manifest with
`securityContext: {privileged: y}` ran privileged once applied while every rule saw the string "y" and passed it,
and `allowPrivilegeEscalation: n` was denied as unset. tests/tools/yamljson, a Go build of sigs.k8s.io/yaml
itself, is the judge, through both of aiadmit's reader paths (the node walk and PyYAML's constructor).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from yamljson import aiadmit_reads, yamljson  # noqa: F401  (yamljson: the fixture)

ROOT = Path(__file__).resolve().parent.parent
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: values}\ndata:\n  v: %s\n"
FALLBACK = CONFIGMAP + "  <<: {when: 1}\n"  # a merge key: the document is built by PyYAML's constructor instead

VALUES = ["y", "Y", "n", "N", "yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "true",
          "True", "TRUE", "false", "False", "FALSE", "'y'", '"Y"', "'n'", '"N"', "!!str y", "!!str N", "!!str yes",
          "&a y", "&b N", "!!bool y", "!!bool N", '!!bool "n"', "!!bool 'Y'", "!!bool yes", "!!bool False",
          "[y, 'y', n, N, !!str n]", "{a: y, b: 'n'}", "y2", "n1", "yy", "nn", "yes please", "y n", "~y", "Y.",
          "|\n    y", ">\n    n"]


def _ours(text: str) -> tuple[object, str]:
    """(the `v` value as aiadmit reads it; the input error's text, or "")."""
    data, error = aiadmit_reads(text, "values.yaml")
    return (None if data is None else data["v"]), error


@pytest.mark.parametrize("shape", [CONFIGMAP, FALLBACK], ids=["node-walk", "pyyaml-constructor"])
def test_plain_booleans_are_what_sigs_k8s_io_yaml_makes_of_them(yamljson, shape):
    texts = [shape % value for value in VALUES]
    mismatches = []
    for value, text, answer in zip(VALUES, texts, yamljson(texts)):
        assert not answer.get("error"), (value, answer)
        (theirs,) = answer["json"]
        ours, error = _ours(text)
        # compared as JSON: in Python True == 1, and "y" must not pass for true
        if error or json.dumps(ours) != json.dumps(theirs["data"]["v"]):
            mismatches.append((value, theirs["data"]["v"], ours if not error else error))
    assert not mismatches


@pytest.mark.parametrize("shape", [CONFIGMAP, FALLBACK], ids=["node-walk", "pyyaml-constructor"])
@pytest.mark.parametrize("value", ["!!bool maybe", "!!bool yEs", "!!bool 1"])
def test_a_bool_tag_on_other_text_is_an_input_error_with_its_position(yamljson, shape, value):
    """kubectl refuses `!!bool maybe` ("cannot decode"); PyYAML's constructor raised a KeyError (a traceback)."""
    text = shape % value
    (answer,) = yamljson([text])
    assert answer["json"] is None and "as a !!bool" in answer["error"]
    ours, error = _ours(text)
    assert ours is None
    assert error == (f"values.yaml:5:6: YAML: !!bool {value.split()[1]!r} is not a boolean to Kubernetes' YAML "
                     "reader (go-yaml v2)")


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: yn
  namespace: sandbox
  labels:
    aiadmit.dev/tier: untrusted
spec:
  containers:
    - name: c
      image: busybox:1.36
      securityContext:
        privileged: %s
        allowPrivilegeEscalation: %s
"""
PRIVILEGED = "/spec/containers/0/securityContext/privileged"
ESCALATION = "/spec/containers/0/securityContext/allowPrivilegeEscalation"


def _hardening(tmp_path: Path, text: str) -> dict[str, str]:
    """The untrusted-hardening denials of a Pod, path -> message, from `python3 -m webhook audit`."""
    path = tmp_path / "pod.yaml"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "webhook", "audit", "-f", "json", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and not report["errors"], done.stdout + done.stderr
    return {f["path"]: f"{f['line']}:{f['column']} {f['message']}" for f in report["findings"]
            if f["action"] == "deny" and f["policy"] == "untrusted-hardening"}


@pytest.mark.parametrize("privileged, escalation", [("true", "false"), ("y", "n"), ("Y", "N"), ("&p y", "&e n")])
def test_privileged_y_is_denied_and_escalation_n_is_not(tmp_path, privileged, escalation):
    """On main `privileged: y` passed (the string "y") and `allowPrivilegeEscalation: n` was denied as unset."""
    denied = _hardening(tmp_path, POD % (privileged, escalation))
    assert denied[PRIVILEGED] == "13:9 container c of pod must not be privileged (securityContext.privileged)"
    assert ESCALATION not in denied


@pytest.mark.parametrize("privileged, escalation", [("n", "'n'"), ("N", "!!str n")])
def test_privileged_n_is_not_denied_and_a_quoted_n_is_no_false(tmp_path, privileged, escalation):
    """A quoted `'n'` is the string "n" to Kubernetes too: not `false`, so escalation is not switched off."""
    denied = _hardening(tmp_path, POD % (privileged, escalation))
    assert PRIVILEGED not in denied
    assert denied[ESCALATION].endswith("container c of pod must set securityContext.allowPrivilegeEscalation: false")
