"""The API server's defaulting, recorded: every shape of tests/data/defaults/shapes.yaml created on the real
kube-apiserver v1.37.2 with a server-side dry run, and the stored object it answers (normalised: no uid, timestamps,
status) compared with tests/data/defaults/recorded.json, which tests/test_k8s_defaults_recorded.py holds
webhook/k8s/defaults.py to. AIADMIT_RECORD_DEFAULTS=1 writes the record instead of comparing."""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import defaults_record  # noqa: E402

pytestmark = pytest.mark.e2e


def test_dry_run_creates_match_the_record(apiserver):
    recording = os.environ.get("AIADMIT_RECORD_DEFAULTS") == "1"
    if not recording and not os.path.exists(defaults_record.RECORDED):
        pytest.skip(f"no record at {defaults_record.RECORDED}: AIADMIT_RECORD_DEFAULTS=1 writes it")
    answers, refused = {}, []
    for shape in defaults_record.shapes():
        answer = apiserver.kubectl("create", "--dry-run=server", "-n", "default", "-o", "json", "-f", "-",
                                   input=json.dumps(shape), timeout=60, check=False)
        if answer.returncode != 0:
            refused.append(f"{shape['metadata']['name']}: {answer.stderr.strip()}")
            continue
        answers[shape["metadata"]["name"]] = defaults_record.normalised(json.loads(answer.stdout))
    if recording:
        with open(defaults_record.RECORDED, "w", encoding="utf-8") as handle:
            json.dump(answers, handle, indent=1, sort_keys=True)
            handle.write("\n")
    assert refused == [], "\n".join(refused)
    assert answers == defaults_record.recorded()
