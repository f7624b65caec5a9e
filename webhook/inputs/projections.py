"""What the live caches keep of each object (webhook/inputs/livefacts.py): only the fields some rule reads.

Every object of a watched type stays in memory for the server's life, so each type is cut down to what
classification or a rule needs: a Deployment to its templates' container resources, a Node to its labels, a
ConfigMap to short values, a DeviceClass to its extended resource name. Never more than that, and never a Secret.
"""

from __future__ import annotations

from typing import Any

from webhook.model.facts import scheduling_policy

SHOWN_VALUE = 64  # characters of a ConfigMap value kept: a device variable's values are short words


def slim_workload(obj: dict) -> dict:
    """What classification of an HPA target needs, and nothing else (no env, no command, no status)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    pod = template.get("spec") or {}

    def containers(key: str) -> list[dict]:
        return [{"name": c.get("name"), "resources": c.get("resources") or {}}
                for c in pod.get(key) or () if isinstance(c, dict)]

    slim_pod: dict[str, Any] = {"containers": containers("containers")}
    if pod.get("initContainers"):
        slim_pod["initContainers"] = containers("initContainers")
    if pod.get("resourceClaims"):
        slim_pod["resourceClaims"] = pod["resourceClaims"]
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "labels": meta.get("labels") or {}},
            "spec": {"replicas": spec.get("replicas"),
                     "template": {"metadata": {"labels": (template.get("metadata") or {}).get("labels") or {}},
                                  "spec": slim_pod}}}


def labels_projection(obj: dict) -> dict:
    """Name, namespace and labels only: what a Node (devices-declared: is the node a pod is pinned to an accelerator
    node?) or a LocalQueue (gang-admission, gpu-quota: does the queue a workload names exist?) is read for. A Node's
    status (images, conditions) is most of its size and changes every few minutes; none of it is kept."""
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "labels": meta.get("labels") or {}}}


def policy_projection(obj: dict) -> dict:
    """A PodGroup as gang-admission reads it: its name and scheduling policy."""
    return {"metadata": labels_projection(obj)["metadata"], "spec": {"schedulingPolicy": scheduling_policy(obj)}}


def claim_projection(obj: dict) -> dict:
    """A ResourceClaim or ResourceClaimTemplate as the DRA rules read it: its spec (what it asks for) and, of a
    claim's status, only `reservedFor` (the pods using it now: who else holds a shared claim)."""
    meta = obj.get("metadata") or {}
    out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
           "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}, "spec": obj.get("spec") or {}}
    status = obj.get("status")
    if isinstance(status, dict) and isinstance(status.get("reservedFor"), list):
        out["status"] = {"reservedFor": [{"resource": r.get("resource"), "name": r.get("name")}
                                         for r in status["reservedFor"] if isinstance(r, dict)]}
    return out


def configmap_projection(obj: dict) -> dict:
    """What the devices-declared rules need of a ConfigMap loaded through envFrom: its string data, each value cut
    to SHOWN_VALUE characters (a longer one is replaced by its length: it is never a "no device" word, so it still
    counts as exposing devices). ConfigMaps hold up to 1 MiB each; this keeps memory to keys and short values.

    Secrets are never listed or watched: read access to every Secret of the cluster would make the webhook the
    most valuable credential in it, for a rule that a warning covers (`env-from-unknown`). docs/security.md.
    """
    meta = obj.get("metadata") or {}
    data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
    kept = {k: (v if len(v) <= SHOWN_VALUE else f"<{len(v)} characters>")
            for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")}, "data": kept}


def deviceclass_projection(obj: dict) -> dict:
    """A DeviceClass as classification reads it: its name and `spec.extendedResourceName`, the extended resource a
    pod may ask for to get one of its devices (k8s/deviceclasses.py). Selectors and configs (opaque driver
    parameters) are not kept."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    extended = spec.get("extendedResourceName")
    out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": {"name": meta.get("name")}}
    if isinstance(extended, str) and extended:
        out["spec"] = {"extendedResourceName": extended}
    return out
