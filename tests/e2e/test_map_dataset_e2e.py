"""The MAP data set (tests/data/map) on the real kube-apiserver v1.37.2: each object is created (server-side dry run)
without and then with the set's MutatingAdmissionPolicies installed, and the stored objects (or the denial) must be
what `expected.json` records, which tests/test_map_dataset.py holds the offline runner to. So the offline runner
and the API server agree, through one record, whenever this runs.

`AIADMIT_RECORD_MAP=1` writes the record from the API server's answers instead of checking them (how it was made:
docs/cli.md). Nothing is stored but the policies, their params and the Widget CRD."""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml
from crdwait import wait_established

pytestmark = pytest.mark.e2e

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "map")
RECORD = os.path.join(DATA, "expected.json")
SERVER_SET = ("uid", "creationTimestamp", "resourceVersion", "managedFields", "generation")


def normalized(obj: dict) -> dict:
    """A stored object less what the API server sets after admission (identity, times, generation, status)."""
    out = {k: v for k, v in obj.items() if k != "status"}
    out["metadata"] = {k: v for k, v in obj.get("metadata", {}).items() if k not in SERVER_SET}
    return out


def _sets() -> list[str]:
    return sorted(name[:-len(".objects.yaml")] for name in os.listdir(DATA) if name.endswith(".objects.yaml"))


def _docs(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [d for d in yaml.safe_load_all(handle) if d]


def _crd() -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _answer(apiserver, obj: dict) -> dict:
    """The stored object of a dry-run create, or the API server's message when it refuses."""
    done = apiserver.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(obj),
                             check=False, timeout=60)
    if done.returncode != 0:
        message = done.stderr.strip()
        message = message.split(': error when creating "STDIN": ', 1)[-1]
        return {"denied": message}
    return {"stored": normalized(json.loads(done.stdout))}


def _until(apiserver, objects: list, done, seconds: float = 45.0) -> tuple[bool, list]:
    """Policies take effect (and stop) a moment after they are written: ask until `done(answers)`, bounded."""
    end = time.monotonic() + seconds
    while True:
        answers = [_answer(apiserver, o) for o in objects]
        if done(answers) or time.monotonic() > end:
            return done(answers), answers
        time.sleep(1.0)


def _still(apiserver, objects: list, baselines: list) -> tuple[bool, list]:
    """Recording: the answers once they hold still for three rounds, at least 5 s after the policies were written
    (or as soon as they differ from the answers without them, and then hold still)."""
    start, history = time.monotonic(), []
    while True:
        history.append([_answer(apiserver, o) for o in objects])
        last = history[-3:]
        if len(last) == 3 and last[0] == last[1] == last[2] and (
                last[0] != baselines or time.monotonic() - start > 5):
            return True, last[0]
        if time.monotonic() - start > 45:
            return False, history[-1]
        time.sleep(1.0)


def test_the_api_server_answers_as_recorded(apiserver):
    kubectl = apiserver.kubectl
    kubectl("apply", "-f", "-", input=json.dumps(_crd()))
    wait_established(kubectl, "crd/widgets.example.com")
    recording = os.environ.get("AIADMIT_RECORD_MAP") == "1"
    record = {} if recording else json.load(open(RECORD, encoding="utf-8"))
    sets = {name: (_docs(os.path.join(DATA, f"{name}.yaml")), _docs(os.path.join(DATA, f"{name}.objects.yaml")))
            for name in _sets()}
    bare = {name: _until(apiserver, objects, lambda answers: True)[1] for name, (_, objects) in sets.items()}
    disagreements = []
    for name, (policy_docs, objects) in sets.items():
        names = [o["metadata"]["name"] for o in objects]
        baselines = [{"stored": a["stored"]} if "stored" in a else a for a in bare[name]]
        if not recording:
            for object_name, base in zip(names, baselines):
                if base.get("stored") != record[name][object_name]["baseline"]:
                    disagreements.append(f"{name}/{object_name}: the object without the policies is not the one "
                                         f"recorded: {json.dumps(base)[:400]}")
        applied = json.dumps({"apiVersion": "v1", "kind": "List", "items": policy_docs})
        kubectl("apply", "-f", "-", input=applied)
        try:
            if recording:
                ok, answers = _still(apiserver, objects, baselines)
                record[name] = {n: dict(a, baseline=b.get("stored")) for n, a, b in zip(names, answers, baselines)}
            else:
                want = [{k: v for k, v in record[name][n].items() if k != "baseline"} for n in names]
                ok, answers = _until(apiserver, objects, lambda answers: answers == want)
            if not ok:
                disagreements.append(f"{name}: the API server answers {json.dumps(answers)[:1500]}")
        finally:
            kubectl("delete", "-f", "-", "--wait=true", input=applied, check=False)
        gone, _ = _until(apiserver, objects, lambda answers: answers == baselines)
        assert gone, f"{name}: the policies still act after they were deleted"
    if recording:
        with open(RECORD, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=1, sort_keys=True)
            handle.write("\n")
    assert disagreements == [], "\n".join(disagreements)
