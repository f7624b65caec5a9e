"""Invariant (d): an UPDATE never admits a new or a wider violation; what offends is compared, not only where.

Generated: each widening below (a capability list, a hostPath, a shared device, a device variable, a node pin) is
made at every pod-template location of every kind, in an untrusted namespace, from an old object that already had
the narrower violation; it must be denied. The same violation unchanged, or narrowed, beside an unrelated change,
stays a warning ("already present before this update"), so the audit -> warn -> enforce rollout still works.
"""

import copy

import pytest

from serverproc import make_review
from templates import judges, locations, untrusted_facts
from webhook.app import admission
from webhook.engine.core import Engine
from webhook.model.resource import Resource

IMAGE = "registry.example/x@sha256:" + "a" * 64


def spec(caps=("NET_BIND_SERVICE",), host_path="/var/log/app", shared=("nvidia.com/gpu.shared",), devices="0",
         extra_volume=False):
    container = {"name": "c", "image": IMAGE,
                 "securityContext": {"capabilities": {"add": list(caps)}},
                 "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": devices}],
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                               "limits": {"memory": "1Gi", **{name: 1 for name in shared}}}}
    volumes = [{"name": "logs", "hostPath": {"path": host_path}}]
    if extra_volume:
        volumes.append({"name": "scratch", "emptyDir": {}})
    return {"volumes": volumes, "containers": [container]}


WIDENINGS = {
    "capabilities": ({"caps": ("SYS_ADMIN", "SYS_PTRACE", "SYS_MODULE")}, "no-added-capabilities", True),
    "hostPath to the root": ({"host_path": "/"}, "no-host-path", False),
    "device variable to all": ({"devices": "all"}, "visible-devices-env", True),
    "another shared device": ({"shared": ("nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb.shared")},
                              "no-shared-devices", True),
}
NOT_WIDER = {
    "unchanged, another field changed": {"extra_volume": True},
    "capabilities narrowed": {"caps": ()},
}


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


FACTS = untrusted_facts()


def update(engine, location, old_spec, new_spec):
    old = location.build(old_spec, namespace="tenant")
    new = location.build(new_spec, namespace="tenant")
    return admission.validate(engine, make_review(new, "UPDATE", old)["request"], FACTS)


@pytest.mark.parametrize("widening", sorted(WIDENINGS))
def test_a_wider_violation_is_a_new_one_at_every_location(engine, widening):
    change, rule, per_container = WIDENINGS[widening]
    admitted = []
    for location in locations():
        if not location.has_pod_spec and not per_container:
            continue
        policies = {p.id for p in engine.policies if judges(p, location.kind.kind)}
        if not {"untrusted-hardening", "untrusted-gpu-isolation", "devices-declared"} & policies:
            continue
        old = engine.evaluate(Resource(location.build(spec(), namespace="tenant")), FACTS)
        if rule not in {f.rule for f in old.findings if f.blocking}:
            continue  # the kind is not judged by this rule (TrainJob is not hardened itself)
        outcome = update(engine, location, spec(), spec(**change))
        if outcome.response["allowed"]:
            admitted.append(location.name)
    assert not admitted, f"{widening} was admitted as 'already present' at: {admitted}"


@pytest.mark.parametrize("change", sorted(NOT_WIDER))
def test_the_same_or_a_narrower_violation_stays_a_warning(engine, change):
    denied = []
    for location in locations():
        if not location.has_pod_spec:
            continue
        outcome = update(engine, location, spec(), spec(**NOT_WIDER[change]))
        if not outcome.response["allowed"]:
            denied.append(f"{location.name}: {outcome.denied_policies}")
    assert not denied, f"{change} was denied at: {denied}"


def test_widening_in_a_list_item_is_new_but_reordering_the_same_items_is_not(engine):
    location = next(l for l in locations() if l.kind.kind == "Pod")
    two = spec(caps=("NET_BIND_SERVICE", "CHOWN"))
    swapped = copy.deepcopy(two)
    swapped["containers"][0]["securityContext"]["capabilities"]["add"].reverse()
    assert update(engine, location, two, swapped).response["allowed"]
    assert not update(engine, location, two, spec(caps=("NET_BIND_SERVICE", "NET_RAW"))).response["allowed"]
