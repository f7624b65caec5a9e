"""Invariant (b): unknown never lowers scrutiny. A missing or stale fact makes the strictest reading, and says so.

The namespace tier from live caches that are stale, not yet synced or do not hold the namespace; a cluster audit's
listings; Kueue LocalQueues that do not exist or are unknown (gang-admission, gpu-quota). The live caches are the
real `LiveFacts` bookkeeping driven with real objects and a clock.
"""

import pytest

from serverproc import make_review
from templates import first_location
from webhook.app import admission
from webhook.app.clusteraudit import ListedFacts
from webhook.engine.core import Engine
from webhook.inputs.livefacts import LiveFacts
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource

IMAGE = "registry.example/x@sha256:" + "a" * 64
SHARED_GPU = {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
              "limits": {"memory": "1Gi", "nvidia.com/gpu.shared": 1}}
ESCAPE = {"containers": [{"name": "c", "image": IMAGE, "securityContext": {"privileged": True},
                          "resources": SHARED_GPU}]}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": "tenant", "labels": {"aiadmit.dev/tier": "untrusted"}}}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def live(namespaces, clock):
    facts = LiveFacts(clock=clock)
    for name, cache in facts.caches.items():
        cache.replace(namespaces if name == "namespaces" else [], "1")
    return facts


def engine_with(tmp_path, context_failure):
    config = tmp_path / f"{context_failure}.yaml"
    config.write_text(f"apiVersion: aiadmit.dev/v1alpha1\nkind: Config\ncontextFailure: {context_failure}\n")
    return Engine.load(config_path=str(config))


@pytest.mark.parametrize("context_failure", ["skip", "deny"])
@pytest.mark.parametrize("state", ["fresh", "stale", "absent"])
def test_an_unknown_namespace_is_judged_at_the_untrusted_tier_and_said(tmp_path, context_failure, state):
    engine, clock = engine_with(tmp_path, context_failure), Clock()
    facts = live([NAMESPACE] if state != "absent" else [], clock)
    if state == "stale":
        clock.now += 130  # the 130 s without confirmation
    pod = first_location("", "Pod").build(ESCAPE, namespace="tenant")
    outcome = admission.validate(engine, make_review(pod)["request"], facts)
    assert not outcome.response["allowed"], (state, outcome.response)
    assert {"untrusted-hardening", "untrusted-sandbox", "untrusted-gpu-isolation"} <= set(outcome.denied_policies)
    noted = any("namespace tenant: its labels are unknown" in w for w in outcome.response.get("warnings") or ())
    assert noted == (state != "fresh"), outcome.response.get("warnings")


def test_a_known_namespace_without_a_tier_keeps_none():
    engine, clock = Engine.load(), Clock()
    facts = live([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {}}}], clock)
    evaluation = engine.evaluate(Resource(first_location("", "Pod").build(ESCAPE, namespace="team")), facts)
    assert "untrusted" not in evaluation.classes and not evaluation.notes


def test_a_cluster_audit_knows_every_namespace_and_a_file_audit_only_its_own():
    engine = Engine.load()
    pod = Resource(first_location("", "Pod").build(ESCAPE, namespace="elsewhere"))
    listed = engine.evaluate(pod, ListedFacts([Resource(NAMESPACE)]))
    assert "untrusted" in listed.classes and listed.notes
    files = engine.evaluate(pod, OfflineFacts([Resource(NAMESPACE)]))
    assert "untrusted" not in files.classes  # an audit of manifests judges what the files say


# ------------------------------------------------------------------------------------------------ LocalQueues
def queue(name, namespace="team"):
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": "cq"}}


def job(queue_name):
    gpu = {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
           "limits": {"memory": "1Gi", "nvidia.com/gpu": 1}}
    obj = first_location("kubeflow.org", "PyTorchJob").build(
        {"containers": [{"name": "c", "image": IMAGE, "resources": gpu}]}, labels={
            "kueue.x-k8s.io/queue-name": queue_name})
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4
    return Resource(obj)


def findings(engine, resource, facts, policy):
    return sorted((f.rule, f.result, f.action) for f in engine.evaluate(resource, facts).findings
                  if f.policy == policy)


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


def test_a_made_up_queue_name_is_no_gang_admission(engine):
    namespace = Resource({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    facts = OfflineFacts([namespace, Resource(queue("real"))])
    assert findings(engine, job("made-up"), facts, "gang-admission") == [("queue-exists", "fail", "warn")]
    assert findings(engine, job("real"), facts, "gang-admission") == []
    unknown = findings(engine, job("real"), OfflineFacts([]), "gang-admission")
    assert unknown == [("queue-exists", "skip", "warn")]  # unknown: skip, with the reason


def test_a_made_up_queue_name_leaves_the_gpus_to_resource_quota(engine):
    namespace = Resource({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    facts = OfflineFacts([namespace, Resource(queue("real"))])
    assert ("unknown-queue-quota", "fail", "deny") in findings(engine, job("made-up"), facts, "gpu-quota")
    real = findings(engine, job("real"), facts, "gpu-quota")
    assert ("queue-managed-quota", "fail", "warn") in real and not [r for r in real if r[2] == "deny"]
    # LocalQueues unknown (a namespace known without them only from its quotas): the strictest reading
    quotas_only = OfflineFacts([Resource({"apiVersion": "v1", "kind": "ResourceQuota",
                                          "metadata": {"name": "q", "namespace": "team"},
                                          "spec": {"hard": {"cpu": "10"}}})])
    assert ("unknown-queue-quota", "fail", "deny") in findings(engine, job("real"), quotas_only, "gpu-quota")


def test_live_localqueues_and_nodes_are_kept_as_names_and_labels():
    clock = Clock()
    facts = live([], clock)
    facts.caches["localqueues"].replace([queue("a"), queue("b", "other")], "2")
    facts.caches["nodes"].replace([{"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.present": "true"}},
                                    "status": {"images": [{"names": ["x"] * 50}]}}], "3")
    assert facts.local_queues("team") == ["a"] and facts.local_queues("none") == []
    assert facts.nodes() == {"n1": {"nvidia.com/gpu.present": "true"}}
    assert "status" not in facts.caches["nodes"].items[("", "n1")]
    assert facts.nodes() is facts.nodes()  # built once per change, not per review
    clock.now += 130
    assert facts.local_queues("team") is None and facts.nodes() is None
