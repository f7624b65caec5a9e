"""The `when` conjuncts the engine decides in Python (language/guards.py, engine/planning.py) never change a finding.

The guards exist for speed: a rule whose guard cannot hold runs no CEL. They are only sound if, wherever Python
says "cannot hold", CEL would have said false too (never true, never an error). So every object of the corpus, and
pods shaped to hit each guard's corners (a field absent, null, of the wrong type, a list of non-maps), is evaluated
twice with the built-in bundle: as shipped, and with every rule's guards removed so its whole `when` runs in CEL.
The findings must be the same, message for message.
"""

from __future__ import annotations

import copy

import pytest

from webhook.engine.core import Engine
from webhook.engine.planning import Plan, _held
from webhook.inputs.sources import load_paths
from webhook.language.guards import python_guards
from webhook.model.resource import Resource
from webhook.model.valueclass import replace

from testdata import CORPUS  # tests/data/corpus, in the repository


def _pod(spec: dict, container: dict | None = None) -> dict:
    main = {"name": "main", "image": "registry.example/serve:v1@sha256:" + "a" * 64,
            "resources": {"requests": {"cpu": "4", "memory": "16Gi"},
                          "limits": {"nvidia.com/gpu": "1", "memory": "16Gi"}}}
    main.update(container or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": dict({"containers": [main]}, **spec)}


CORNERS = [
    _pod({}),
    _pod({"volumes": []}),
    _pod({"volumes": None}),
    _pod({"volumes": {"a": 1}}),
    _pod({"volumes": ["not a map"]}),
    _pod({"volumes": [None]}),
    _pod({"volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}),
    _pod({"volumes": [{"name": "w", "image": None}]}),
    _pod({"volumes": [{"name": "w", "image": "a string"}]}),
    _pod({"volumes": [{"name": "w", "image": {"reference": 5}}]}),
    _pod({"volumes": [{"name": "w", "image": {"reference": "registry.example/weights:latest"}},
                      {"name": "scratch", "emptyDir": {}}]}),
    _pod({"volumes": [{"name": "w", "image": {"reference": "registry.example/weights:v2"}}]}),
    _pod({"resources": None}),
    _pod({"resources": "a string"}),
    _pod({"resources": {}}),
    _pod({"resources": {"requests": "a string"}}),
    _pod({"resources": {"limits": {"hugepages-2Mi": "1Gi"}}}),
    _pod({"resources": {"requests": {"hugepages-2Mi": "1Gi"}}}),
    _pod({"resources": {"requests": {"hugepages-2Mi": "1Gi", "memory": "2Gi"}, "limits": {"hugepages-2Mi": "2Gi"}}}),
    _pod({"resources": {"requests": {"cpu": "8", "memory": "32Gi"}}}),
    _pod({}, {"resources": None}),
    _pod({}, {"resources": {"limits": {"hugepages-1Gi": "2Gi"}}}),
    _pod({}, {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}),
]


def _unguarded(engine: Engine) -> Engine:
    """The same policies with no rule guarded in Python: every `when` runs whole, in CEL."""
    policies = []
    for policy in engine.policies:
        bare = copy.copy(policy)
        bare.rules = [replace(rule, presence=()) for rule in policy.rules]
        policies.append(bare)
    return Engine(policies, engine.config, engine.intree)


def _findings(engine: Engine, resource: Resource) -> list[tuple]:
    return [(f.policy, f.rule, f.result, f.action, f.message, f.pointer)
            for f in engine.evaluate(resource).findings]


@pytest.fixture(scope="module")
def engines():
    shipped = Engine.load()
    return shipped, _unguarded(shipped)


def test_guards_change_no_finding_on_the_corpus_and_the_corners(engines):
    shipped, unguarded = engines
    resources = load_paths([CORPUS]).resources + [Resource(obj) for obj in CORNERS]
    assert len(resources) > 150
    differing = [(r.describe(), a, b) for r in resources
                 if (a := _findings(shipped, r)) != (b := _findings(unguarded, r))]
    assert not differing, differing[:3]
    corners = [_findings(shipped, Resource(obj)) for obj in CORNERS]
    # the corners reach the guarded rules: each of them fails, or errors, somewhere
    reached = {(policy, rule, result) for found in corners for policy, rule, result, *_ in found}
    for expected in [("image-digest", "volume-latest-tag", "fail"), ("image-digest", "volume-pinned-by-digest", "fail"),
                     ("image-digest", "volume-latest-tag", "error"),
                     ("hugepages-consistent", "pod-with-cpu-or-memory", "fail"),
                     ("hugepages-consistent", "pod-request-equals-limit", "fail"),
                     ("hugepages-consistent", "pod-request-equals-limit", "error")]:
        assert expected in reached, expected


def test_a_pod_without_image_volumes_or_pod_resources_runs_none_of_their_rules(engines):
    """The point of the guards: decided in Python, so no CEL, no binding for these rules."""
    shipped, _ = engines
    policies = {p.id: p for p in shipped.policies}
    classes = frozenset({"ai", "accelerated"})
    ordinary = _pod({"volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]})
    template = shipped.scope(Resource(ordinary), None)[0].workload.templates[0]
    for policy, rules in (("image-digest", {"volume-latest-tag", "volume-pinned-by-digest"}),
                          ("hugepages-consistent", {"pod-with-cpu-or-memory", "pod-request-equals-limit"})):
        plan = Plan.of(policies[policy], "pod", classes, True)
        assert {rule.name for rule in plan.rules} >= rules
        assert not {rule.name for rule in plan.active(ordinary, template, None)} & rules
    with_image = _pod({"volumes": [{"name": "w", "image": {"reference": "registry.example/weights:v2"}}],
                       "resources": {"limits": {"hugepages-2Mi": "1Gi"}}})
    template = shipped.scope(Resource(with_image), None)[0].workload.templates[0]
    assert {"volume-latest-tag", "volume-pinned-by-digest"} <= {
        r.name for r in Plan.of(policies["image-digest"], "pod", classes, True).active(with_image, template, None)}
    assert "pod-with-cpu-or-memory" in {r.name for r in Plan.of(policies["hugepages-consistent"], "pod", classes,
                                                                 True).active(with_image, template, None)}


def test_which_conjuncts_are_guards():
    assert python_guards("has(container.resources) && has(container.resources.limits) && x > 1") == (
        ("container", ("resources",)), ("container", ("resources", "limits")))
    assert python_guards("pod.volumes.exists(v, has(v.image)) && y") == (("pod", ("volumes",), "image"),)
    assert python_guards("pod.volumes.exists(v, has(w.image))") == ()  # not the loop variable: no guard
    assert python_guards("pod.volumes.exists(v, has(v.image) || true)") == ()
    assert python_guards("has(pod.volumes) || x") == ()  # only top-level `&&` operands
    # has() guards first, then exists-has() ones, each in the order written (the engine's plan numbers them so)
    assert python_guards("has(pod.a) && pod.v.exists(e, has(e.f)) && (has(pod.b) && c) && has(pod.c)") == (
        ("pod", ("a",)), ("pod", ("c",)), ("pod", ("v",), "f"))
    named = {"vols": "has(pod.volumes) && pod.volumes.exists(v, has(v.image))", "either": "a || b",
             "outer": "variables.vols && z"}
    assert python_guards("variables.outer && variables.either", named) == (
        ("pod", ("volumes",)), ("pod", ("volumes",), "image"))
    assert python_guards("!variables.vols", named) == ()  # negated: nothing is required
    assert python_guards("variables.unknown", named) == ()


@pytest.mark.parametrize("volumes,may_hold", [
    ([], False), ([{"name": "a"}], False), ([{"name": "a"}, {"name": "b", "emptyDir": {}}], False),
    ([{"name": "a", "image": None}], True), ([{"name": "a"}, {"name": "w", "image": {}}], True),
    (["not a map"], True), ([None], True), ([{"name": "a"}, 7], True),  # CEL's has() on a non-map is an error
    ({"image": 1}, True), (None, True), ("volumes", True),  # not a list: exists() is CEL's to answer
])
def test_an_exists_has_guard_is_false_only_where_cel_is(volumes, may_hold):
    """Bit clear only for a list of maps none of which holds the field; everything else runs the CEL."""
    check = _held((("pod", ("volumes",), "image"),))  # (object, pod spec, pod metadata, container)
    assert bool(check({}, {"volumes": volumes}, {}, None)) is may_hold
    assert check({}, {}, {}, None) == 1  # the path absent: CEL's error (has() guards say absent), not Python's
