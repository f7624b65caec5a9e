"""GPU pods and dry-run creates against aiadmit as installed in the single-node cluster: what the install tests send
(test_install.py, test_cluster_objects_install.py) and how they read the answer."""

from __future__ import annotations

import json
import uuid

from kubernetes import client
from kubernetes.client.rest import ApiException

from nodeharness import wait_for

VALIDATE = "validate.aiadmit.dev"
DENIED = f'admission webhook "{VALIDATE}" denied the request'
UNREACHABLE = f'failed calling webhook "{VALIDATE}"'
IMAGE = "registry.example/train:1.0"  # never pulled: a GPU pod finds no GPU on this node and stays Pending


def gpu_pod(name: str, namespace: str, requests: bool = True) -> dict:
    resources = {"limits": {"nvidia.com/gpu": "1", "memory": "8Gi"}}
    if requests:
        resources["requests"] = {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "10Gi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"priorityClassName": "ai-batch",
                     "containers": [{"name": "train", "image": IMAGE, "resources": resources}]}}


def make_gpu_namespace(api) -> str:
    """A namespace with a GPU quota (the controller manager's quota controller fills in its status) and the
    priority class that bare GPU pods may use (policies/priority-class.yaml)."""
    name = f"gpu-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    for cls, value in (("ai-batch", 1000), ("ai-inference", 2000)):
        try:
            client.SchedulingV1Api(api).create_priority_class({"metadata": {"name": cls}, "value": value})
        except ApiException as exc:
            if exc.status != 409:
                raise
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_resource_quota(name, {"metadata": {"name": "gpus"},
                                                 "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}})
    # Admitted once the quota has a status and both replicas' watches have seen it (or denied meanwhile).
    last = []

    def admitted() -> bool:
        last[:] = dry_run(api, gpu_pod(f"probe-{uuid.uuid4().hex[:5]}", name))[:2]
        return last[0] == 201

    try:
        wait_for("a compliant GPU pod to be admitted (quota seen)", admitted, 90, 1)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; last answer: {last}") from None
    return name


def dry_run(api, body: dict) -> tuple[int, str, dict | None]:
    """Create with dryRun=All: the full admission chain (both webhooks), nothing stored. (status, message, pod)."""
    try:
        pod = client.CoreV1Api(api).create_namespaced_pod(body["metadata"]["namespace"], body, dry_run="All",
                                                          _request_timeout=15)
        return 201, "", api.sanitize_for_serialization(pod)
    except ApiException as exc:
        message = exc.body or str(exc)
        try:
            message = json.loads(exc.body).get("message", message)
        except (TypeError, ValueError):
            pass
        return exc.status, message, None
