"""tests/data/map/create-answers.json on the real kube-apiserver v1.37.2: each MutatingAdmissionPolicy or Binding
is accepted or refused at create (server-side dry run) as recorded, with the recorded message. tests/
test_mapoffline.py holds aiadmit's loader to the same answers: what the API server refuses does not load."""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.e2e

CASES = json.load(open(os.path.join(os.path.dirname(__file__), "..", "data", "map", "create-answers.json"),
                       encoding="utf-8"))


def test_the_api_server_accepts_and_refuses_as_recorded(apiserver):
    disagreements = []
    for case in CASES:
        done = apiserver.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-",
                                 input=json.dumps(case["document"]), check=False, timeout=60)
        if (done.returncode != 0) != case["refused"]:
            disagreements.append(f"{case['name']}: recorded refused={case['refused']}, rc={done.returncode}: "
                                 f"{done.stderr.strip()[:300]}")
        elif case["refused"] and case["server"] not in done.stderr:
            disagreements.append(f"{case['name']}: recorded {case['server']!r}, got {done.stderr.strip()[:300]}")
    assert disagreements == [], "\n".join(disagreements)
