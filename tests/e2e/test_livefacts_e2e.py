"""LiveFacts against a real kube-apiserver: list, watch, and the webhook reading namespace labels live."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: serverproc, objects

from serverproc import make_review, start_server  # noqa: E402
from webhook.inputs.livefacts import LiveFacts  # noqa: E402

pytestmark = pytest.mark.e2e


def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_livefacts_syncs_and_follows_watch_events(apiserver, namespace):
    api = apiserver.api_client
    core = client.CoreV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    core.patch_namespace(namespace, {"metadata": {"labels": {"aiadmit.dev/enforcement": "warn"}}})
    core.create_namespaced_resource_quota(namespace, {
        "metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}})
    client.SchedulingV1Api(api).create_priority_class({"metadata": {"name": f"ai-batch-{suffix}"}, "value": 1000})
    facts = LiveFacts(api, watch_seconds=5).start()
    try:
        wait_for(facts.synced, what="initial sync")
        assert facts.namespace_labels(namespace)["aiadmit.dev/enforcement"] == "warn"
        assert [q["metadata"]["name"] for q in facts.resource_quotas(namespace)] == ["gpus"]
        assert f"ai-batch-{suffix}" in facts.priority_classes()
        assert facts.runtime_classes() is not None
        assert facts.nodes() is not None  # the nodes of the cluster, by name (labels only)
        assert facts.local_queues(namespace) == []  # Kueue's CRD absent (404) or no queue here: none, known

        client.NodeV1Api(api).create_runtime_class({"metadata": {"name": f"gvisor-{suffix}"}, "handler": "runsc"})
        core.patch_namespace(namespace, {"metadata": {"labels": {"aiadmit.dev/enforcement": "audit"}}})
        client.AppsV1Api(api).create_namespaced_deployment(namespace, {
            "metadata": {"name": "llm"},
            "spec": {"selector": {"matchLabels": {"app": "llm"}},
                     "template": {"metadata": {"labels": {"app": "llm"}},
                                  "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.0",
                                                           "env": [{"name": "T", "value": "secret-token"}],
                                                           "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
        wait_for(lambda: f"gvisor-{suffix}" in (facts.runtime_classes() or []), what="runtime class event")
        wait_for(lambda: (facts.namespace_labels(namespace) or {}).get("aiadmit.dev/enforcement") == "audit",
                 what="namespace label event")
        wait_for(lambda: facts.find(namespace, "Deployment", "llm") is not None, what="deployment event")
        assert "secret-token" not in str(facts.find(namespace, "Deployment", "llm").obj)

        core.delete_namespaced_resource_quota("gpus", namespace)
        wait_for(lambda: facts.resource_quotas(namespace) == [], what="quota deletion")
        time.sleep(6)  # a watch call ended (watch_seconds=5) and was renewed: still fresh
        assert all(age is not None and age < 6 for age in facts.ages().values())
    finally:
        facts.stop()


def test_served_webhook_reads_namespace_labels_live(apiserver, namespace, tmp_path):
    core = client.CoreV1Api(apiserver.api_client)
    core.patch_namespace(namespace, {"metadata": {"labels": {"aiadmit.dev/enforcement": "warn"}}})
    from objects import POLICY_FILES, gpu_pod

    args = ["--kubeconfig", str(apiserver.kubeconfig)] + [a for p in POLICY_FILES for a in ("--policies", p)]
    with start_server(tmp_path, args) as server:  # /readyz waits for the caches' first sync
        status, body = server.review("validate", make_review(gpu_pod(shm=False, namespace=namespace)))
        assert status == 200 and body["response"]["allowed"] is True
        assert any(w.startswith("shm-sized: ") for w in body["response"]["warnings"])
        _, strict = server.review("validate", make_review(gpu_pod(shm=False, namespace="default")))
        assert strict["response"]["allowed"] is False
        assert 'aiadmit_context_cache_age_seconds{resource="namespaces"}' in server.metrics()


def test_served_webhook_holds_a_device_class_extended_resource_to_the_gpu_rules(apiserver, namespace, tmp_path):
    """A DeviceClass of an accelerator class that names an extended resource (spec.extendedResourceName): once the
    webhook's DeviceClass cache has it, a pod asking for that name without /dev/shm is denied by shm-sized as a
    nvidia.com/gpu pod is; once it is deleted, the name is no GPU again."""
    from objects import POLICY_FILES, gpu_pod

    resources = client.ResourceV1Api(apiserver.api_client)
    name = f"example.com/dra-gpu-{uuid.uuid4().hex[:6]}"
    obj = gpu_pod(shm=False, namespace=namespace)
    limits = obj["spec"]["containers"][0]["resources"]["limits"]
    limits[name] = limits.pop("nvidia.com/gpu")

    def denied(server) -> bool:
        status, body = server.review("validate", make_review(obj))
        assert status == 200, body
        response = body["response"]
        return response["allowed"] is False and "shm-sized: " in response["status"]["message"]

    args = ["--kubeconfig", str(apiserver.kubeconfig)] + [a for p in POLICY_FILES for a in ("--policies", p)]
    with start_server(tmp_path, args) as server:  # /readyz waits for the first sync, DeviceClasses included
        assert not denied(server)  # no DeviceClass names it: an unknown extended resource, not a GPU
        created = resources.create_device_class({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"extendedResourceName": name,
                     "selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}]}})
        try:
            assert created.spec.extended_resource_name == name, "the API server dropped spec.extendedResourceName"
            wait_for(lambda: denied(server), what="the DeviceClass in the webhook's cache")
            resources.delete_device_class("gpu.nvidia.com")
            wait_for(lambda: not denied(server), what="the DeviceClass's deletion in the webhook's cache")
        finally:
            try:
                resources.delete_device_class("gpu.nvidia.com")
            except client.ApiException as exc:
                assert exc.status == 404
