"""37 ValidatingAdmissionPolicies written from the Kubernetes documentation's examples (tests/data/vap/README.md),
each run offline on an allowed and a denied object: the verdicts and messages the API server gives.

The expectations (tests/data/vap/expected.json) were written from the documented behaviour, not recorded from this
runner, and tests/e2e/test_vap_dataset_e2e.py re-checks them on the real kube-apiserver v1.37.2."""

from __future__ import annotations

import json
import os

import pytest

from webhook.app.audit import audit_paths
from webhook.engine.core import Engine

DATA = os.path.join(os.path.dirname(__file__), "data", "vap")
EXPECTED = json.load(open(os.path.join(DATA, "expected.json"), encoding="utf-8"))


def test_the_data_set_is_large_enough():
    assert len(EXPECTED) >= 30
    for name in EXPECTED:
        assert os.path.isfile(os.path.join(DATA, f"{name}.yaml")) and os.path.isfile(
            os.path.join(DATA, f"{name}.objects.yaml"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_allowed_and_denied(name):
    expected = EXPECTED[name]
    engine = Engine.load([os.path.join(DATA, f"{name}.yaml")])
    result = audit_paths(engine, [os.path.join(DATA, f"{name}.objects.yaml")])
    assert result.errors == []
    by_name = {e.resource.name: e for e in result.evaluations}
    assert by_name[expected["allowed"]].findings == []
    findings = by_name[expected["denied"]].findings
    assert len(findings) == len(expected["deniedFindings"]), [f.message for f in findings]
    for finding, want in zip(findings, expected["deniedFindings"]):
        assert (finding.action, finding.result) == (want["action"], want["result"])
        if "message" in want:
            assert finding.message == want["message"]
        else:
            assert finding.message.startswith(want["messageStartsWith"]), finding.message
        assert finding.position() == by_name[expected["denied"]].resource.origin.position("")
