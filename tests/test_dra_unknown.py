"""DRA claims the facts do not know yet, and devices the pod as a whole gets (issue 22's remainder).

An untrusted pod naming a ResourceClaim the webhook's cache has not seen is denied through the real admission path,
with the default config (contextFailure: skip), because a claim named by pods is shared by all of them; the same
pod with the claim in the cache and used by no one else passes the policy. The pod-level device count (`podClaims`)
counts each claim's request once per pod, and only for the containers that run for the pod's life.
"""

import json

import pytest

from kubernetes import client

from serverproc import make_review
from webhook.app import admission
from webhook.engine.core import Engine
from webhook.inputs import review as reviews
from webhook.inputs.livefacts import LiveFacts
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource


DIGEST = "@sha256:" + "0" * 64
API = client.ApiClient()


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


def claim_model(name, namespace, device_class, reserved=()):
    """A ResourceClaim as the live cache holds it: built with the kubernetes client's own models, then wired."""
    return API.sanitize_for_serialization(client.ResourceV1ResourceClaim(
        api_version="resource.k8s.io/v1", kind="ResourceClaim",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        spec=client.V1ResourceClaimSpec(devices=client.V1DeviceClaim(requests=[client.V1DeviceRequest(
            name="gpu", exactly=client.V1ExactDeviceRequest(device_class_name=device_class))])),
        status=client.V1ResourceClaimStatus(reserved_for=[
            client.V1ResourceClaimConsumerReference(resource="pods", name=p, uid=f"uid-{p}") for p in reserved])))


def pod(name, namespace, claims, uses):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"resourceClaims": claims, "containers": [{
                "name": "main", "image": "registry.example.com/job" + DIGEST,
                "resources": {"requests": {"cpu": "8", "memory": "64Gi", "ephemeral-storage": "1Gi"},
                              "limits": {"memory": "64Gi"}, "claims": [{"name": u} for u in uses]}}]}}


def tenant_facts(claims):
    facts = LiveFacts(max_age=60)
    facts.caches["namespaces"].replace([{"metadata": {"name": "tenant", "labels": {"aiadmit.dev/tier": "untrusted"}}}],
                                       "1")
    facts.caches["resourceclaims"].replace(claims, "2")
    facts.caches["resourceclaimtemplates"].replace([], "3")
    facts.caches["deployments"].replace([], "4")
    facts.caches["statefulsets"].replace([], "5")
    return facts


def answer(engine, obj, facts):
    return admission.validate(engine, reviews.parse(json.dumps(make_review(obj)).encode()), facts).response


def test_an_untrusted_pod_naming_a_claim_the_cache_has_not_seen_is_denied(engine):
    assert engine.config.context_failure == "skip"  # the default: unknown facts skip a rule that requires them
    obj = pod("nb", "tenant", [{"name": "g", "resourceClaimName": "fresh"}], ["g"])
    response = answer(engine, obj, tenant_facts([]))
    assert response["allowed"] is False, response
    assert "names ResourceClaim fresh (claim g), which aiadmit does not know" in response["status"]["message"]
    assert "untrusted-gpu-isolation: untrusted container main" in response["status"]["message"]
    # Once the cache holds it, used by no other pod, the policy passes it (other policies judge its hardening).
    seen = tenant_facts([claim_model("fresh", "tenant", "mig.nvidia.com", reserved=[])])
    assert "untrusted-gpu-isolation" not in answer(engine, obj, seen)["status"]["message"]
    # ... and with another pod holding it, the known claim is judged as shared (the policy did run on it).
    held = tenant_facts([claim_model("fresh", "tenant", "mig.nvidia.com", reserved=["other"])])
    message = answer(engine, obj, held)["status"]["message"]
    assert "also used by Pod/other" in message and "does not know" not in message


def test_a_stale_claim_cache_denies_too(engine):
    facts = tenant_facts([claim_model("fresh", "tenant", "mig.nvidia.com", reserved=[])])
    facts.caches["resourceclaims"].confirmed -= 120  # stale: the cache knows nothing for sure
    obj = pod("nb", "tenant", [{"name": "g", "resourceClaimName": "fresh"}], ["g"])
    findings = {f.rule: f.result for f in engine.evaluate(Resource(obj), facts).findings
                if f.policy == "untrusted-gpu-isolation"}
    assert findings.get("no-unknown-claims") == "fail", findings


def test_pod_level_floors_count_a_claim_once_and_only_for_running_containers(engine):
    from webhook.inputs.sources import load_text
    template = load_text("""
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: three, namespace: ml}
spec: {spec: {devices: {requests: [{name: gpus, exactly: {deviceClassName: gpu.nvidia.com, count: 3}}]}}}
""", "t.yaml").resources

    def messages(spec):
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec}
        facts = OfflineFacts(template + [Resource(obj)])
        return [f.message for f in engine.evaluate(Resource(obj), facts).findings
                if f.rule == "pod-cpu-per-device" and f.result == "fail"]

    def container(name, **extra):
        return dict({"name": name, "image": "r.example/x" + DIGEST,
                     "resources": {"requests": {"ephemeral-storage": "1Gi"}, "claims": [{"name": "g"}]}}, **extra)
    base = {"resources": {"requests": {"cpu": "2", "memory": "64Gi"}, "limits": {"memory": "64Gi"}},
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "three"}]}
    # Two containers naming the claim: 3 devices, not 6.
    assert messages(dict(base, containers=[container("a"), container("b")])) == [
        "pod requests 2 cpu for the whole pod for 3 device(s); at least 1 per device keeps the accelerators fed"]
    # Named only by a run-to-completion init container: no device beside the pod's running budget.
    plain = dict(container("init"))
    bare = {"name": "main", "image": "r.example/x" + DIGEST, "resources": {"requests": {"ephemeral-storage": "1Gi"}}}
    assert messages(dict(base, initContainers=[plain], containers=[bare])) == []
    # A native sidecar naming it and a container naming it too: still once.
    sidecar = container("side", restartPolicy="Always")
    assert len(messages(dict(base, initContainers=[sidecar], containers=[container("main")]))) == 1


def test_a_device_class_extended_resource_is_an_accelerator_for_every_policy(engine):
    from webhook.inputs.sources import load_text
    from webhook.k8s.deviceclasses import accelerated
    classes = load_text("""
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec: {extendedResourceName: example.com/dra-gpu}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: rdma.example.com}
spec: {extendedResourceName: example.com/rdma}
""", "classes.yaml").resources
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": {"containers": [{
        "name": "main", "image": "r.example/x" + DIGEST,
        "resources": {"requests": {"cpu": "8", "memory": "64Gi", "ephemeral-storage": "1Gi"},
                      "limits": {"memory": "64Gi", "example.com/dra-gpu": "1"}}}]}}

    def shm(facts):
        return [f.rule for f in engine.evaluate(Resource(obj), facts).findings if f.policy == "shm-sized"]
    assert shm(OfflineFacts([Resource(obj)])) == []  # no DeviceClass known: the config's accelerators decide
    assert shm(OfflineFacts(classes + [Resource(obj)])) != []  # a GPU: it needs /dev/shm like nvidia.com/gpu
    config = engine.config.classification
    widened = accelerated(config, {"example.com/dra-gpu": "gpu.nvidia.com", "example.com/rdma": "rdma.example.com",
                                   "example.com/*": "gpu.nvidia.com"})
    assert widened.is_accelerator("example.com/dra-gpu") and not widened.is_accelerator("example.com/rdma")
    assert not widened.is_accelerator("example.com/other")  # a glob in a name widens nothing
    assert accelerated(config, None) is config and accelerated(config, {}) is config
