"""The defaulting record's shared parts: the shapes (tests/data/defaults/shapes.yaml), how an API server's answer is
normalised into recorded.json, and the paths. Used by tests/test_k8s_defaults_recorded.py (offline) and
tests/e2e/test_k8s_defaults_e2e.py (which records and re-checks on kube-apiserver v1.37.2)."""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

DATA = os.path.join(os.path.dirname(__file__), "data", "defaults")
SHAPES = os.path.join(DATA, "shapes.yaml")
RECORDED = os.path.join(DATA, "recorded.json")
# Set by the API server when it stores the object, not by defaulting: nothing an offline run can know.
_SYSTEM_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "namespace")


def shapes() -> list[dict]:
    with open(SHAPES, encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def _replace(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    return new if value == old else value


def normalised(answer: dict) -> dict:
    """The dry-run-created object without what the store assigns (uid, timestamps, status): the uid, which a Job
    copies into its generated selector and labels, becomes `<uid>`."""
    out = json.loads(json.dumps(answer))
    metadata = out.get("metadata") or {}
    uid = metadata.get("uid")
    for key in _SYSTEM_METADATA:
        metadata.pop(key, None)
    out.pop("status", None)
    return _replace(out, uid, "<uid>") if uid else out


def recorded() -> dict:
    with open(RECORDED, encoding="utf-8") as handle:
        return json.load(handle)
