"""MutatingAdmissionPolicies written from the Kubernetes documentation's and Kubernetes' own tests' examples
(tests/data/map/README.md), each run offline on its objects: the object kube-apiserver v1.37.2 stores, or its
denial, as tests/data/map/expected.json records them from that API server (tests/e2e/test_map_dataset_e2e.py
recorded them and re-checks them whenever it runs).

Two checks per object: from the object as the API server had it when its MAPs ran (the record's `baseline`: its
defaulting and built-in admission plugins applied), the offline runner must store exactly what the API server
stored; and from the manifest itself (aiadmit's own defaulting), it must change the same fields or deny alike."""

from __future__ import annotations

import json
import os

import pytest

from webhook.engine import mapeval, mapreport
from webhook.engine.core import Engine
from webhook.inputs.sources import load_paths
from webhook.model.facts import OfflineFacts

DATA = os.path.join(os.path.dirname(__file__), "data", "map")
RECORD = json.load(open(os.path.join(DATA, "expected.json"), encoding="utf-8"))
SERVER_SET = ("uid", "creationTimestamp", "resourceVersion", "managedFields", "generation")


def normalized(obj: dict) -> dict:
    """As the e2e test records a stored object: less what the API server sets after admission."""
    out = {k: v for k, v in obj.items() if k != "status"}
    out["metadata"] = {k: v for k, v in obj.get("metadata", {}).items() if k not in SERVER_SET}
    return out


def _run(name: str):
    engine = Engine.load([os.path.join(DATA, f"{name}.yaml")])
    loaded = load_paths([os.path.join(DATA, f"{name}.objects.yaml")])
    assert loaded.errors == []
    return engine, loaded.resources, OfflineFacts(loaded.resources)


def _paths(operations: list) -> set:
    return {op["path"] for op in operations}


def test_the_data_set_covers_every_file_and_both_patch_types():
    names = sorted(n[:-len(".objects.yaml")] for n in os.listdir(DATA) if n.endswith(".objects.yaml"))
    assert names == sorted(RECORD)
    kinds = set()
    for name in names:
        engine, _, _ = _run(name)
        kinds |= {m.patch_type for p in engine.intree.mutating.values() for m in p.mutations}
    assert kinds == {"JSONPatch", "ApplyConfiguration"}
    answers = [a for objects in RECORD.values() for a in objects.values()]
    assert any("denied" in a for a in answers) and any("stored" in a and a["stored"] != a["baseline"]
                                                       for a in answers)


@pytest.mark.parametrize("name", sorted(RECORD))
def test_the_stored_object_is_the_api_servers(name):
    engine, resources, facts = _run(name)
    for resource in resources:
        want = RECORD[name][resource.name]
        outcome = mapeval.mutate(engine.intree, resource, facts, obj=want["baseline"])
        if "denied" in want:
            assert outcome.denied, f"{resource.name}: the API server denies: {want['denied']}"
            assert outcome.denied[0][2] in want["denied"], resource.name
        else:
            assert outcome.denied == [], resource.name
            assert normalized(outcome.patched) == want["stored"], resource.name


@pytest.mark.parametrize("name", sorted(RECORD))
def test_from_the_manifest_the_same_fields_change(name):
    engine, resources, facts = _run(name)
    for resource in resources:
        want = RECORD[name][resource.name]
        outcome = mapeval.mutate(engine.intree, resource, facts)
        if "denied" in want:
            assert outcome.denied and outcome.denied[0][2] in want["denied"], resource.name
            continue
        assert outcome.denied == [], resource.name
        before = mapeval.defaulted(resource.obj, resource.group, resource.kind)
        assert _paths(mapreport.changes(before, outcome.patched)) == _paths(
            mapreport.changes(want["baseline"], want["stored"])), resource.name
