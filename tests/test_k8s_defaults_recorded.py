"""webhook/k8s/defaults.py against what kube-apiserver v1.37.2 stored: each shape of tests/data/defaults/shapes.yaml
defaulted offline and compared, field by field, with the API server's server-side dry-run create of it
(tests/data/defaults/recorded.json, recorded and re-checked by tests/e2e/test_k8s_defaults_e2e.py).

The only fields allowed to differ are listed in NOT_OFFLINE with the reason an offline run cannot know them; each
must still differ somewhere (a listed field that defaults.py learnt to fill in is taken off the list)."""

from __future__ import annotations

import fnmatch
import os

import pytest

import defaults_record
from webhook.k8s.defaults import defaulted

# path pattern (fnmatch over the flattened path) -> why the offline defaulting leaves it out
_GENERATED = ("the Job registry strategy's PrepareForCreate (generateSelector) adds the controller-uid and job-name "
              "labels and selector, from the uid the API server assigns to the request: not a defaulting function")
_PRIORITY = ("the Priority admission plugin sets priority and preemptionPolicy from the cluster's PriorityClasses "
             "(here none: 0 and PreemptLowerPriority): not a defaulting function, it needs the cluster")
NOT_OFFLINE: dict[str, str] = {
    "job-*/metadata/labels/*": _GENERATED,
    "job-*/spec/selector/matchLabels/*": _GENERATED,
    # the template's metadata: {} offline holds the generated labels on the API server
    "job-*/spec/template/metadata": _GENERATED,
    "pod-*/spec/priority": _PRIORITY,
    "pod-*/spec/preemptionPolicy": _PRIORITY,
    "ds-*/metadata/annotations/deprecated.daemonset.template.generation":
        "the DaemonSet registry strategy's PrepareForCreate sets spec.templateGeneration (1 on create, after "
        "mutating admission) and v1 conversion writes it into this annotation: not a defaulting function",
}


def _flat(value, path: str = "") -> dict:
    if isinstance(value, dict) and value:
        out = {}
        for key, item in value.items():
            out.update(_flat(item, f"{path}/{key}"))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(_flat(item, f"{path}/{index}"))
        return out
    return {path: value}


def _differences(name: str, shape: dict, record: dict) -> list[str]:
    group = shape["apiVersion"].rsplit("/", 1)[0] if "/" in shape["apiVersion"] else ""
    ours, theirs = _flat(defaulted(shape, group, shape["kind"])), _flat(record)
    return [f"{name}{path}: offline {ours.get(path, '<absent>')!r}, API server {theirs.get(path, '<absent>')!r}"
            for path in sorted(set(ours) | set(theirs)) if ours.get(path, "<absent>") != theirs.get(path, "<absent>")]


def _excused(difference: str) -> str | None:
    path = difference.split(":", 1)[0]
    return next((pattern for pattern in NOT_OFFLINE if fnmatch.fnmatchcase(path, pattern)), None)


SHAPES = {shape["metadata"]["name"]: shape for shape in defaults_record.shapes()}
if not os.path.exists(defaults_record.RECORDED):
    pytest.skip(f"no record at {defaults_record.RECORDED} yet: tests/e2e/test_k8s_defaults_e2e.py with "
                "AIADMIT_RECORD_DEFAULTS=1 writes it from kube-apiserver v1.37.2", allow_module_level=True)


def test_every_shape_is_recorded():
    assert sorted(defaults_record.recorded()) == sorted(SHAPES)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_defaulted_offline_as_the_api_server_stored_it(name):
    differences = _differences(name, SHAPES[name], defaults_record.recorded()[name])
    assert [d for d in differences if _excused(d) is None] == []


def test_every_listed_exception_is_still_needed():
    used = {_excused(d) for name in SHAPES for d in _differences(name, SHAPES[name], defaults_record.recorded()[name])}
    assert sorted(set(NOT_OFFLINE) - used) == []
