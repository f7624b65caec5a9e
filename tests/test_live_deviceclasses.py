"""DeviceClasses in the webhook's live facts: an accelerator class's extended resource is held to the GPU rules.

The cache is driven with real DeviceClass objects (built with the kubernetes client's own models, then wired as the
API server sends them) and the answers come from the real admission path (`admission.validate` on an AdmissionReview).
While the cache is not synced or is stale, an untrusted pod's domain-qualified extended resources are judged as
accelerators (never less scrutiny); a trusted pod is judged by the config's lists, with a warning that says so.
"""

import json

import pytest

from kubernetes import client

from serverproc import make_review
from webhook.app import admission
from webhook.app.clusteraudit import ListedFacts
from webhook.engine.core import Engine
from webhook.inputs import review as reviews
from webhook.inputs.livefacts import LiveFacts
from webhook.k8s.deviceclasses import presumed, unchecked
from webhook.k8s.workload import Classification, build_workload
from webhook.model.resource import Resource

DIGEST = "@sha256:" + "0" * 64
API = client.ApiClient()
NAME = "example.com/dra-gpu"


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


def device_class(name, extended=None):
    return API.sanitize_for_serialization(client.V1DeviceClass(
        api_version="resource.k8s.io/v1", kind="DeviceClass",
        metadata=client.V1ObjectMeta(name=name, resource_version="7"),
        spec=client.V1DeviceClassSpec(extended_resource_name=extended, selectors=[client.V1DeviceSelector(
            cel=client.V1CELDeviceSelector(expression=f'device.driver == "{name}"'))])))


def pod(namespace, resource=NAME):
    """A pod that asks for `resource` as it would ask a device plugin, with no /dev/shm (what shm-sized wants of a
    pod holding an accelerator)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace}, "spec": {
        "containers": [{"name": "main", "image": "registry.example.com/job" + DIGEST,
                        "resources": {"requests": {"cpu": "8", "memory": "64Gi", "ephemeral-storage": "1Gi"},
                                      "limits": {"memory": "64Gi", resource: "1"}}}]}}


def facts(classes=None, max_age=60):
    """Live facts with every cache synced; the DeviceClasses too when `classes` is given."""
    live = LiveFacts(max_age=max_age)
    live.caches["namespaces"].replace([
        {"metadata": {"name": "tenant", "labels": {"aiadmit.dev/tier": "untrusted"}}},
        {"metadata": {"name": "ml", "labels": {}}}], "1")
    for name, cache in live.caches.items():
        if name not in ("namespaces", "deviceclasses"):
            cache.replace([], "2")
    if classes is not None:
        live.caches["deviceclasses"].replace(classes, "3")
    return live


def answer(engine, obj, live):
    return admission.validate(engine, reviews.parse(json.dumps(make_review(obj)).encode()), live).response


def shm_denied(response):
    return response["allowed"] is False and "shm-sized: " in response["status"]["message"]


def test_the_cache_keeps_name_and_extended_resource_only():
    live = facts([device_class("gpu.nvidia.com", NAME), device_class("rdma.example.com")])
    assert live.extended_resources() == {NAME: "gpu.nvidia.com"}
    kept = live.caches["deviceclasses"].items[("", "gpu.nvidia.com")]
    assert kept["spec"] == {"extendedResourceName": NAME} and "selectors" not in str(kept)
    assert live.synced()


def test_a_device_class_created_holds_its_extended_resource_to_the_gpu_rules_and_deleted_follows(engine):
    live = facts([])
    assert not shm_denied(answer(engine, pod("ml"), live))  # no DeviceClass names it: not a GPU
    live.caches["deviceclasses"].apply("ADDED", device_class("gpu.nvidia.com", NAME))
    response = answer(engine, pod("ml"), live)
    assert shm_denied(response), response
    assert "/dev/shm" in response["status"]["message"]
    live.caches["deviceclasses"].apply("DELETED", device_class("gpu.nvidia.com", NAME))
    assert not shm_denied(answer(engine, pod("ml"), live))
    # A class that is not an accelerator (config acceleratorDeviceClasses) backs no GPU.
    live.caches["deviceclasses"].apply("ADDED", device_class("rdma.example.com", NAME))
    assert not shm_denied(answer(engine, pod("ml"), live))


@pytest.mark.parametrize("state", ["unsynced", "stale"])
def test_unknown_device_classes_make_an_untrusted_pods_extended_resources_accelerators(engine, state):
    live = facts(None if state == "unsynced" else [])
    if state == "stale":
        live.caches["deviceclasses"].confirmed -= 120
    assert live.extended_resources() is None
    response = answer(engine, pod("tenant"), live)
    assert shm_denied(response), response
    assert any(f"DeviceClasses unknown" in w and NAME in w and "judged as accelerator" in w
               for w in response.get("warnings") or ()), response
    # The same pod in a trusted namespace: judged by the config's lists, and told so.
    trusted = answer(engine, pod("ml"), live)
    assert not shm_denied(trusted), trusted
    assert any("DeviceClasses unknown" in w and NAME in w and "was not checked" in w
               for w in trusted.get("warnings") or ()), trusted


def test_unknown_device_classes_presume_only_what_a_device_class_could_back(engine):
    classification = engine.config.classification
    obj = pod("tenant")
    obj["spec"]["containers"][0]["resources"]["limits"].update({
        "nvidia.com/gpu": "1", "hugepages-2Mi": "1Gi", "kubernetes.io/fancy": "1",
        "deviceclass.resource.kubernetes.io/rdma.example.com": "1", "rdma/hca": "1"})
    workload = build_workload(Resource(obj), classification, {"aiadmit.dev/tier": "untrusted"})
    # nvidia.com/gpu is an accelerator already, native and implicit names are decided without a DeviceClass
    assert unchecked(workload, classification) == [NAME, "rdma/hca"]
    known = Classification(non_accelerators=("rdma/*",))
    assert unchecked(workload, known) == [NAME]
    widened = presumed(classification, ["example.com/a*"])
    assert widened.is_accelerator("example.com/a*") and not widened.is_accelerator("example.com/ab")


def test_non_accelerators_from_the_config_are_not_presumed(engine, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\n"
                      "classification:\n  nonAccelerators: [\"example.com/dra-*\"]\n")
    strict = Engine.load(config_path=str(config))
    assert strict.config.classification.non_accelerators == ("example.com/dra-*",)
    live = facts(None)
    response = answer(strict, pod("tenant"), live)
    assert not shm_denied(response) and not any("DeviceClasses unknown" in w for w in response.get("warnings") or ())
    # ... but a known DeviceClass of an accelerator class naming it still makes it a GPU.
    live.caches["deviceclasses"].replace([device_class("gpu.nvidia.com", NAME)], "4")
    assert shm_denied(answer(strict, pod("tenant"), live))


def test_a_complete_cluster_listing_without_device_classes_presumes_nothing(engine):
    listed = ListedFacts([Resource({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": "tenant", "labels": {"aiadmit.dev/tier": "untrusted"}}})])
    assert listed.extended_resources() == {}
    evaluation = engine.evaluate(Resource(pod("tenant")), listed)
    assert not [f for f in evaluation.findings if f.policy == "shm-sized" and f.result == "fail"]
    assert not any("DeviceClasses unknown" in n for n in evaluation.notes)
