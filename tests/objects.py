"""Objects the tests are about, shared by several test modules (so that no test module imports another).

Builders of the reviews' objects (a GPU Pod, a Deployment of it, a controller's ownerReference), the policies the
webhook's mechanics are tested with, and a small valid policy document for the loader and cache tests.
"""

import os

from webhook.language.bundle import BUILTIN_POLICY_DIR

IMAGE = "registry.example/train@sha256:0d7c2a3c4b0e9e5f1b8c6d9a2f3e4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f1e"


def gpu_pod(name="train", namespace="ml", shm=True, owner=None, env=None):
    container = {"name": "train", "image": IMAGE,
                 "resources": {"requests": {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "50Gi"},
                               "limits": {"nvidia.com/gpu": 1, "memory": "32Gi"}}}
    spec = {"containers": [container]}
    if shm:
        spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}]
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if env:
        container["env"] = env
    meta = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def deployment(shm=True, replicas=2):
    pod = gpu_pod(shm=shm)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve", "namespace": "ml"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "serve"}},
                     "template": {"metadata": {"labels": {"app": "serve"}}, "spec": pod["spec"]}}}


OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "serve-7d9f", "uid": "1d0b6a62-2222-4c52-9d4e-0b1e",
         "controller": True, "blockOwnerDeletion": True}
RS_CONTROLLER = "system:serviceaccount:kube-system:replicaset-controller"
# The webhook's mechanics are tested with two built-in policies whose contract is settled; the bundle grows and
# each policy has its own cases under tests/policies.
POLICY_FILES = [os.path.join(BUILTIN_POLICY_DIR, f"{p}.yaml") for p in ("resources-declared", "shm-sized")]

# A valid policy (format with name=...): the loader and disk-cache tests edit it one field at a time.
GOOD = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: {name}
summary: A test policy.
why: Because.
remediation: Fix it.
action: deny
match:
  anyClasses: [ai]
target: container
rules:
  - name: has-image
    expression: has(container.image)
    message: container {{{{container.name}}}} needs an image
"""
