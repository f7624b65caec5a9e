"""The VAP data set (tests/data/vap) on the real kube-apiserver v1.37.2: every policy's allowed object is admitted
and its denied object gets the findings `expected.json` records, which tests/test_vap_dataset.py holds the offline
runner to. So the offline runner and the API server agree, through one record, whenever this runs.

Server-side dry-run creates only (nothing is stored but the policies, params and namespaces). Deny: the create
fails and stderr holds the message; Warn: it succeeds with the message as a warning; Audit: it succeeds (the audit
annotation goes to the audit log, which this control plane does not keep: not checked here)."""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml
from crdwait import wait_established

pytestmark = pytest.mark.e2e

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "vap")
EXPECTED = json.load(open(os.path.join(DATA, "expected.json"), encoding="utf-8"))


def _crd(group: str, kind: str, plural: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _dry_run(apiserver, obj: dict):
    return apiserver.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-", input=json.dumps(obj),
                             check=False, timeout=60)


def _agrees(answer, findings: list) -> bool:
    denies = [f for f in findings if f["action"] == "deny"]
    warns = [f for f in findings if f["action"] == "warn"]
    if denies:
        want = denies[0].get("message") or denies[0]["messageStartsWith"]
        return answer.returncode != 0 and want in answer.stderr
    if answer.returncode != 0:
        return False
    if warns:
        return all(f"Warning: {f['message']}" in answer.stderr for f in warns)
    return "Validation failed" not in answer.stderr


def _until(check, seconds: float = 30.0):
    """Policies take effect (and stop) a moment after they are written: ask again until it agrees, bounded."""
    end = time.monotonic() + seconds
    while True:
        ok, answer = check()
        if ok or time.monotonic() > end:
            return ok, answer
        time.sleep(0.5)


def test_the_api_server_answers_as_recorded(apiserver):
    kubectl = apiserver.kubectl
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        _crd("example.com", "Widget", "widgets"), _crd("rules.example.com", "ReplicaLimit", "replicalimits")]}))
    wait_established(kubectl, "crd/widgets.example.com", "crd/replicalimits.rules.example.com")
    for name in ("demo", "staging", "test"):
        kubectl("create", "namespace", name, check=False)
    disagreements = []
    for name in sorted(EXPECTED):
        expected = EXPECTED[name]
        with open(os.path.join(DATA, f"{name}.yaml"), encoding="utf-8") as handle:
            policy_docs = [d for d in yaml.safe_load_all(handle) if d]
        with open(os.path.join(DATA, f"{name}.objects.yaml"), encoding="utf-8") as handle:
            objects = [d for d in yaml.safe_load_all(handle) if d]
        for namespace in (o for o in objects if o["kind"] == "Namespace"):
            kubectl("apply", "-f", "-", input=json.dumps(namespace))
        applied = json.dumps({"apiVersion": "v1", "kind": "List", "items": policy_docs})
        kubectl("apply", "-f", "-", input=applied)
        try:
            denied = next(o for o in objects if o["metadata"]["name"] == expected["denied"])
            allowed = next(o for o in objects if o["metadata"]["name"] == expected["allowed"])
            ok, answer = _until(lambda: ((a := _dry_run(apiserver, denied)) and _agrees(a, expected["deniedFindings"]), a))
            if not ok:
                disagreements.append(f"{name}: denied object {expected['denied']}: rc={answer.returncode} "
                                     f"{answer.stderr.strip()[:400]}")
            ok, answer = _until(lambda: ((a := _dry_run(apiserver, allowed)) and _agrees(a, []), a))
            if not ok:
                disagreements.append(f"{name}: allowed object {expected['allowed']}: rc={answer.returncode} "
                                     f"{answer.stderr.strip()[:400]}")
            status = kubectl("get", "validatingadmissionpolicy", f"{name}.example.com", "-o", "json").stdout
            warnings = (json.loads(status).get("status") or {}).get("typeChecking", {}).get("expressionWarnings")
            if warnings:
                disagreements.append(f"{name}: type-check warnings {warnings}")
        finally:
            kubectl("delete", "-f", "-", "--wait=true", input=applied, check=False)
    assert disagreements == [], "\n".join(disagreements)
