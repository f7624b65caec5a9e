"""The mutations, applied to every real manifest of the corpus (tests/data/corpus).

For each corpus resource the engine's patch must
- apply cleanly with an independent RFC 6902 implementation (`jsonpatch`) and give exactly `Mutation.patched`;
- leave no failure of a rule that its mutation addresses, unless the failing field was set explicitly in the
  original (an explicit unsafe value is denied, never overwritten);
- be idempotent: mutating the result yields no operation;
- only write fields that the kind's CRD schema has (tests/data/crds.json.gz): the API server prunes unknown fields of a
  custom resource without an error, so a patch outside the schema would be silently lost.
"""

from __future__ import annotations

import copy
import os

import jsonpatch
import pytest

from webhook.model import pointer as jp
from webhook.engine.core import Engine
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource
from webhook.inputs.sources import load_paths

from testdata import CORPUS  # tests/data/corpus, in the repository
from testdata import crd_schemas  # tests/data/crds.json.gz

# policy -> the rules its mutations make pass when the fields they fill in were absent
ADDRESSED = {
    "shm-sized": {"mounted"},
    "untrusted-sandbox": {"sandboxed"},
    "untrusted-hardening": {"no-service-account-token", "no-privilege-escalation", "run-as-non-root",
                            "drop-all-capabilities", "seccomp"},
    "priority-class": {"set"},
}



def _corpus():
    """Every corpus resource with the facts of its own file: each file is one project's input, as an audit of it
    would see it (the corpus as a whole is not one cluster: a RuntimeClass of the GPU operator's assets says
    nothing about the clusters the Kubeflow notebooks run in)."""
    loaded = load_paths([CORPUS])
    by_file: dict = {}
    for resource in loaded.resources:
        by_file.setdefault(resource.origin.file, []).append(resource)
    facts = {file: OfflineFacts(resources) for file, resources in by_file.items()}
    return [(resource, facts[resource.origin.file]) for resource in loaded.resources]


CASES = _corpus()
RESOURCES = [resource for resource, _ in CASES]
ENGINE = Engine.load()


SCHEMAS = crd_schemas()


def _child(schema: dict, token: str):
    """The schema of `token` under `schema`, None when the CRD would prune it; True when anything goes."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return True
    if schema.get("type") == "array" or "items" in schema:
        return schema.get("items") if (token.isdigit() or token == "-") else None
    properties = schema.get("properties")
    if properties is not None and token in properties:
        return properties[token]
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        return additional
    return True if additional is True else None


def _pruned(schema, value, where: str) -> list[str]:
    """Every path inside `value` that `schema` does not keep."""
    if schema is True:
        return []
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            child = _child(schema, str(key))
            out += [f"{where}/{key}"] if child is None else _pruned(child, item, f"{where}/{key}")
    elif isinstance(value, list):
        child = _child(schema, "0")
        for position, item in enumerate(value):
            out += [f"{where}/{position}"] if child is None else _pruned(child, item, f"{where}/{position}")
    return out


def _schema_problems(resource: Resource, operations: list[dict]) -> list[str]:
    group, _, version = resource.api_version.rpartition("/")
    schema = SCHEMAS.get((group, version, resource.kind))
    if schema is None:
        return []  # a core kind: its schema is the built-in API, not a CRD
    problems = []
    for operation in operations:
        node = schema
        for token in jp.split(operation["path"]):
            node = _child(node, token) if node is not True else True
            if node is None:
                problems.append(f"{operation['path']}: not in the {resource.kind} CRD schema (pruned)")
                break
        else:
            problems += [f"{p}: not in the {resource.kind} CRD schema (pruned)"
                         for p in _pruned(node, operation["value"], operation["path"])]
    return problems


def _ids():
    return [f"{os.path.relpath(r.origin.file, CORPUS)}#{r.origin.document}:{r.kind}/{r.name}" for r in RESOURCES]


@pytest.mark.parametrize("resource, facts", CASES, ids=_ids())
def test_mutation_of_corpus_resource(resource, facts):
    original = copy.deepcopy(resource.obj)
    mutation = ENGINE.mutate(resource, facts)
    assert mutation.errors == []
    assert resource.obj == original, "mutate must not change its input"

    applied = jsonpatch.apply_patch(original, mutation.operations)
    assert applied == mutation.patched

    after = ENGINE.evaluate(Resource(applied, resource.origin), facts)
    left = [f for f in after.findings
            if f.result == "fail" and f.rule in ADDRESSED.get(f.policy, ())
            and jp.resolve(original, f.pointer) is None  # an explicit value in the original is denied, not fixed
            and not (f.policy == "priority-class" and resource.kind == "Pod")]  # never set on bare Pods (policy)
    assert not left, [f"{f.policy}/{f.rule} at {f.pointer}: {f.message}" for f in left]

    again = ENGINE.mutate(Resource(applied, resource.origin), facts)
    assert again.operations == [] and again.errors == []

    assert _schema_problems(resource, mutation.operations) == []


def test_the_corpus_exercises_every_mutating_policy():
    """The checks above are not vacuous: each mutating policy patches some corpus resource."""
    patched = set()
    for resource, facts in CASES:
        patched |= set(ENGINE.mutate(resource, facts).by_policy)
    assert set(ADDRESSED) - {"untrusted-hardening"} <= patched
    assert "untrusted-hardening" in patched or "untrusted-hardening" not in ENGINE.by_id


def test_schema_walk_catches_pruned_fields():
    """A Notebook template has no metadata; a patch there would be pruned by the API server."""
    notebook = Resource({"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": "n"},
                         "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}})
    assert _schema_problems(notebook, [{"op": "add", "path": "/spec/template/metadata",
                                        "value": {"labels": {"a": "b"}}}])
    assert _schema_problems(notebook, [{"op": "add", "path": "/spec/template/spec/containers/0/securityContext",
                                        "value": {"notAField": True}}])
    assert not _schema_problems(notebook, [{"op": "add", "path": "/spec/template/spec/containers/0/securityContext",
                                            "value": {"capabilities": {"drop": ["ALL"]}}}])
