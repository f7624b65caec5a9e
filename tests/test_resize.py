"""In-place resize (`pods/resize`, GA in Kubernetes 1.35) is an UPDATE of the pod's resources (issue 22 item 3).

Before, the subresource was skipped like `status`: a resize could take a GPU pod's memory limit below its /dev/shm
or its requests to zero with no check at all. Now the whole pod after the resize is judged, and as for any UPDATE
only violations the pod did not have before are denied. The real engine and the built-in policies judge, as the
webhook would; the webhook configuration must send the subresource.
"""

import copy
import os

import pytest
import yaml

from serverproc import make_review
from webhook.app import admission
from webhook.engine.core import Engine

IMAGE = "vllm/vllm-openai@sha256:" + "a" * 64
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


def gpu_pod(memory="32Gi", shm="8Gi", cpu="8"):
    """A running GPU pod that meets the checklist: requests, memory limit, a /dev/shm inside it."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "ml"},
            "spec": {"priorityClassName": "ai-batch",
                     "containers": [{"name": "trainer", "image": IMAGE,
                                     "resources": {"requests": {"cpu": cpu, "memory": memory,
                                                                "ephemeral-storage": "20Gi"},
                                                   "limits": {"memory": memory, "nvidia.com/gpu": "1"}},
                                     "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}],
                     "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}}]}}


def resize(engine, old, new):
    request = make_review(new, operation="UPDATE", old=old, sub_resource="resize")["request"]
    return admission.validate(engine, request)


def test_a_resize_below_dev_shm_is_denied(engine):
    old = gpu_pod()
    outcome = resize(engine, old, gpu_pod(memory="4Gi"))
    assert not outcome.response["allowed"], outcome.response
    assert outcome.denied_policies == ["shm-sized"]
    assert "must be smaller than its memory limit 4Gi" in outcome.response["status"]["message"]


def test_a_resize_of_a_request_to_zero_is_denied(engine):
    new = gpu_pod()
    new["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "0"
    outcome = resize(engine, gpu_pod(), new)
    assert not outcome.response["allowed"]
    assert outcome.denied_policies == ["resources-declared"]
    assert "must request a non-zero cpu" in outcome.response["status"]["message"]


def test_a_resize_that_keeps_the_checklist_is_admitted(engine):
    outcome = resize(engine, gpu_pod(), gpu_pod(memory="64Gi", cpu="16"))
    assert outcome.response["allowed"], outcome.response
    assert outcome.outcome == "allowed"


def test_a_resize_below_a_per_device_floor_warns(engine):
    outcome = resize(engine, gpu_pod(), gpu_pod(cpu="500m"))
    assert outcome.response["allowed"]
    assert any(w.startswith("resources-declared: container trainer requests 500m cpu for 1 device(s)")
               for w in outcome.response.get("warnings", [])), outcome.response


def test_a_resize_denies_only_what_is_new(engine):
    # The pod had its /dev/shm too big already (created before the policy): resizing its cpu is not refused for it.
    old = gpu_pod(memory="4Gi")
    new = gpu_pod(memory="4Gi", cpu="16")
    outcome = resize(engine, old, new)
    assert outcome.response["allowed"], outcome.response
    assert any(w.startswith("shm-sized: (already present before this update)")
               for w in outcome.response.get("warnings", [])), outcome.response


def test_pod_level_resources_resized_below_dev_shm_are_denied(engine):
    # Pod-level resources: the pod's memory limit bounds a container that sets none of its own.
    def pod(memory):
        obj = gpu_pod()
        obj["spec"]["resources"] = {"requests": {"cpu": "8", "memory": memory}, "limits": {"memory": memory}}
        obj["spec"]["containers"][0]["resources"] = {"requests": {"ephemeral-storage": "20Gi"},
                                                     "limits": {"nvidia.com/gpu": "1"}}
        return obj
    assert resize(engine, pod("32Gi"), pod("64Gi")).response["allowed"]
    outcome = resize(engine, pod("32Gi"), pod("4Gi"))
    assert not outcome.response["allowed"]
    assert "the pod's memory limit (spec.resources) 4Gi" in outcome.response["status"]["message"]


def test_other_subresources_stay_unchecked(engine):
    new = gpu_pod(memory="4Gi")
    for sub in ("status", "scale", "binding"):
        request = make_review(new, operation="UPDATE", old=gpu_pod(), sub_resource=sub)["request"]
        assert admission.validate(engine, request).outcome == "skipped", sub


def test_the_mutating_webhook_patches_no_resize(engine):
    # A Pod's spec is immutable but for what resize changes: a patch adding /dev/shm would make the resize fail.
    old = copy.deepcopy(gpu_pod())
    old["spec"]["volumes"], old["spec"]["containers"][0]["volumeMounts"] = [], []
    new = copy.deepcopy(old)
    new["spec"]["containers"][0]["resources"]["limits"]["memory"] = "64Gi"
    request = make_review(new, operation="UPDATE", old=old, sub_resource="resize")["request"]
    outcome = admission.mutate(engine, request)
    assert outcome.response["allowed"] and "patch" not in outcome.response


def test_webhook_configurations_send_resize_to_the_validating_webhook_only():
    for path in (("manifests", "base", "webhooks.yaml"),):
        with open(os.path.join(ROOT, *path), encoding="utf-8") as handle:
            validating, mutating = list(yaml.safe_load_all(handle))[:2]
        assert validating["kind"] == "ValidatingWebhookConfiguration"
        assert mutating["kind"] == "MutatingWebhookConfiguration"
        core = {r for hook in validating["webhooks"] for rule in hook["rules"] if rule["apiGroups"] == [""]
                for r in rule["resources"]}
        assert "pods/resize" in core and "pods/ephemeralcontainers" in core
        mutated = {r for hook in mutating["webhooks"] for rule in hook["rules"] for r in rule["resources"]}
        assert not any("/" in r for r in mutated), mutated
    with open(os.path.join(ROOT, "charts", "aiadmit", "templates", "webhooks.yaml"), encoding="utf-8") as handle:
        chart = handle.read()
    assert chart.count("pods/resize") == 1
