"""quotaSelects: which ResourceQuotas charge a pod, as the API server's quota evaluator decides (gpu-quota)."""

import pytest

from webhook.cel.environment import Expression, new_context
from webhook.k8s.quotascope import quota_selects

GPU_POD = {"containers": [{"name": "job", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}


def quota(scopes=None, expressions=None):
    spec = {"hard": {"requests.nvidia.com/gpu": "4"}}
    if scopes is not None:
        spec["scopes"] = scopes
    if expressions is not None:
        spec["scopeSelector"] = {"matchExpressions": expressions}
    return {"kind": "ResourceQuota", "spec": spec}


def pod(**fields):
    return {**GPU_POD, **fields}


def test_unscoped_quota_charges_every_pod():
    assert quota_selects(quota(), pod())


@pytest.mark.parametrize("operator, values, priority_class, expected", [
    ("In", ["train"], "train", True),
    ("In", ["train"], None, False),
    ("In", ["train"], "serve", False),
    ("NotIn", ["train"], None, True),      # the key is absent: NotIn selects
    ("NotIn", ["train"], "train", False),
    ("Exists", [], "serve", True),
    ("Exists", [], None, False),
    ("DoesNotExist", [], None, True),
    ("DoesNotExist", [], "serve", False),
])
def test_priority_class_scope(operator, values, priority_class, expected):
    expression = {"scopeName": "PriorityClass", "operator": operator, "values": values}
    fields = {"priorityClassName": priority_class} if priority_class else {}
    assert quota_selects(quota(expressions=[expression]), pod(**fields)) is expected


def test_terminating_scopes_read_active_deadline():
    assert quota_selects(quota(scopes=["Terminating"]), pod(activeDeadlineSeconds=60))
    assert not quota_selects(quota(scopes=["Terminating"]), pod())
    assert quota_selects(quota(scopes=["NotTerminating"]), pod())


def test_best_effort_is_decided_by_cpu_and_memory_only():
    assert quota_selects(quota(scopes=["BestEffort"]), pod())  # a GPU-only pod is BestEffort QoS
    burstable = {"containers": [{"name": "job", "resources": {"requests": {"memory": "1Gi"}}}]}
    assert not quota_selects(quota(scopes=["BestEffort"]), burstable)
    assert quota_selects(quota(scopes=["NotBestEffort"]), burstable)
    # A container outside the lists (KServe's model) counts too.
    assert quota_selects(quota(scopes=["NotBestEffort"]), {}, {"resources": {"limits": {"cpu": "1"}}})


def test_cross_namespace_affinity_and_unknown_scopes():
    affinity = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"namespaceSelector": {}, "topologyKey": "zone"}}]}}
    assert quota_selects(quota(scopes=["CrossNamespacePodAffinity"]), pod(affinity=affinity))
    assert not quota_selects(quota(scopes=["CrossNamespacePodAffinity"]), pod())
    assert not quota_selects(quota(scopes=["SomethingNew"]), pod())


def test_scopes_and_selector_are_anded():
    q = quota(scopes=["NotTerminating"],
              expressions=[{"scopeName": "PriorityClass", "operator": "In", "values": ["train"]}])
    assert quota_selects(q, pod(priorityClassName="train"))
    assert not quota_selects(q, pod(priorityClassName="train", activeDeadlineSeconds=5))


def test_malformed_quota_does_not_raise():
    assert quota_selects({"spec": {"scopes": "Terminating"}}, pod())  # not a list: no requirement read
    assert quota_selects(None, None)


def test_registered_as_cel_function():
    context = new_context()
    context["q"] = quota(expressions=[{"scopeName": "PriorityClass", "operator": "In", "values": ["train"]}])
    context["pod"] = pod(priorityClassName="train")
    context["container"] = GPU_POD["containers"][0]
    assert Expression("quotaSelects(q, pod, container)")(context) is True
