"""Cluster facts that some policies need (quotas, priority classes, namespace labels, ...).

A provider answers `None` for a fact it does not know: the engine then reports
the rule as skipped, never as passed. Two providers exist: `OfflineFacts`, built
from the other documents of the same audit input, and the live provider in
`webhook.inputs.livefacts` (list+watch caches, never a call per review).
"""

from __future__ import annotations

from typing import Iterable, Optional, Protocol

from webhook.model.resource import Resource

FACTS = ("namespace", "resourceQuotas", "priorityClasses", "runtimeClasses", "hpaTarget", "nodes", "localQueues", "podGroups",
         "resourceClaims")
CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


class ClusterFacts(Protocol):
    # Whether the provider knows every namespace of its cluster (live caches, a cluster audit's listings): a
    # namespace it cannot answer for is then unknown, judged at the strictest tier, not one without a tier. An audit
    # of files knows only the Namespaces its input holds, and judges the others by what the objects say.
    complete: bool

    def namespace_labels(self, namespace: str) -> Optional[dict]: ...

    def resource_quotas(self, namespace: str) -> Optional[list[dict]]: ...

    def priority_classes(self) -> Optional[dict[str, dict]]: ...

    def runtime_classes(self) -> Optional[list[str]]: ...

    def nodes(self) -> Optional[dict[str, dict]]: ...  # node name -> its labels

    def local_queues(self, namespace: str) -> Optional[list[str]]: ...  # Kueue LocalQueue names there

    # Kubernetes' own gang scheduling (scheduling.k8s.io PodGroups): name -> its spec.schedulingPolicy
    def pod_groups(self, namespace: str) -> Optional[dict[str, dict]]: ...

    # DRA (resource.k8s.io): {"ResourceClaim": {name: obj}, "ResourceClaimTemplate": {name: obj},
    # "users": {claim name: ["Kind/name", ...]}} of the namespace: the objects whose pods name each ResourceClaim
    def resource_claims(self, namespace: str) -> Optional[dict]: ...

    def find(self, namespace: str, kind: str, name: str) -> Optional[Resource]: ...

    # Optional (the engine asks with getattr): extended resource name -> the DeviceClass naming it in
    # spec.extendedResourceName (k8s/deviceclasses.py), None when unknown.
    # def extended_resources(self) -> Optional[dict[str, str]]: ...


class NoFacts:
    """Knows nothing: every context-dependent rule is skipped with its reason."""

    complete = False

    def namespace_labels(self, namespace: str) -> Optional[dict]:
        return None

    def resource_quotas(self, namespace: str) -> Optional[list[dict]]:
        return None

    def priority_classes(self) -> Optional[dict[str, dict]]:
        return None

    def runtime_classes(self) -> Optional[list[str]]:
        return None

    def nodes(self) -> Optional[dict[str, dict]]:
        return None

    def local_queues(self, namespace: str) -> Optional[list[str]]:
        return None

    def pod_groups(self, namespace: str) -> Optional[dict[str, dict]]:
        return None

    def resource_claims(self, namespace: str) -> Optional[dict]:
        return None

    def find(self, namespace: str, kind: str, name: str) -> Optional[Resource]:
        return None


class OfflineFacts:
    """Facts from the documents of one audit input.

    A Namespace object in the input makes the input authoritative for that
    namespace: if no ResourceQuota (or LocalQueue, or PodGroup) for it is there, it
    has none; a LocalQueue (a PodGroup, a ResourceClaim or ResourceClaimTemplate)
    in the input makes the namespace's queues (pod groups, claims) known too.
    PriorityClasses, RuntimeClasses, Nodes and DeviceClasses are known when at least
    one of them is in the input.
    """

    complete = False

    def __init__(self, resources: Iterable[Resource]):
        self._namespaces: dict[str, dict] = {}
        self._quotas: dict[str, list[dict]] = {}
        self._priority: Optional[dict[str, dict]] = None
        self._runtime: Optional[list[str]] = None
        self._objects: dict[tuple[str, str, str], Resource] = {}
        self._nodes: Optional[dict[str, dict]] = None
        self._queues: dict[str, list[str]] = {}
        self._pod_groups: dict[str, dict[str, dict]] = {}
        self._claims: dict[str, dict] = {}
        self._claim_users: Optional[dict] = None  # found on the first question about claims: most inputs ask none
        self._extended: Optional[dict[str, str]] = None  # extendedResourceName -> DeviceClass
        for resource in resources:
            kind, name, namespace = resource.kind, resource.name, resource.namespace
            if kind == "Namespace" and resource.api_version == "v1":
                self._namespaces[name] = resource.labels
            elif kind == "ResourceQuota":
                self._quotas.setdefault(namespace, []).append(resource.obj)
            elif kind == "PriorityClass":
                self._priority = self._priority or {}
                self._priority[name] = resource.obj
            elif kind == "RuntimeClass":
                self._runtime = (self._runtime or []) + [name]
            elif kind == "Node" and resource.api_version == "v1":
                self._nodes = self._nodes or {}
                self._nodes[name] = resource.labels
            elif kind == "LocalQueue" and resource.group == "kueue.x-k8s.io":
                self._queues.setdefault(namespace, []).append(name)
            elif kind == "PodGroup" and resource.group == "scheduling.k8s.io":
                self._pod_groups.setdefault(namespace, {})[name] = scheduling_policy(resource.obj)
            elif kind in CLAIM_KINDS and resource.group == "resource.k8s.io":
                self._claims.setdefault(namespace, {}).setdefault(kind, {})[name] = resource.obj
            elif kind == "DeviceClass" and resource.group == "resource.k8s.io":
                spec = resource.obj.get("spec") if isinstance(resource.obj, dict) else None
                extended = spec.get("extendedResourceName") if isinstance(spec, dict) else None
                self._extended = self._extended or {}
                if isinstance(extended, str) and extended:
                    self._extended[extended] = name
            self._objects[(namespace, kind, name)] = resource

    def namespace_labels(self, namespace: str) -> Optional[dict]:
        return self._namespaces.get(namespace)

    def resource_quotas(self, namespace: str) -> Optional[list[dict]]:
        if namespace in self._quotas:
            return self._quotas[namespace]
        return [] if namespace in self._namespaces else None

    def priority_classes(self) -> Optional[dict[str, dict]]:
        return self._priority

    def runtime_classes(self) -> Optional[list[str]]:
        return self._runtime

    def nodes(self) -> Optional[dict[str, dict]]:
        return self._nodes

    def local_queues(self, namespace: str) -> Optional[list[str]]:
        if namespace in self._queues:
            return self._queues[namespace]
        return [] if namespace in self._namespaces else None

    def pod_groups(self, namespace: str) -> Optional[dict[str, dict]]:
        if namespace in self._pod_groups:
            return self._pod_groups[namespace]
        return {} if namespace in self._namespaces else None

    def resource_claims(self, namespace: str) -> Optional[dict]:
        if namespace not in self._claims and namespace not in self._namespaces:
            return None
        known = self._claims.get(namespace, {})
        if self._claim_users is None:
            self._claim_users = claim_users(self._objects.values())
        return {CLAIM_KINDS[0]: known.get(CLAIM_KINDS[0], {}), CLAIM_KINDS[1]: known.get(CLAIM_KINDS[1], {}),
                "users": {claim: who for (ns, claim), who in self._claim_users.items() if ns == namespace}}

    def find(self, namespace: str, kind: str, name: str) -> Optional[Resource]:
        return self._objects.get((namespace, kind, name))

    def extended_resources(self) -> Optional[dict[str, str]]:
        """Extended resource names the input's DeviceClasses give (spec.extendedResourceName), None without any."""
        return self._extended


USERS_WALK_LIMIT = 100_000  # nodes of one object searched for the claims its pods name


def claim_users(resources: Iterable[Resource], limit: int = USERS_WALK_LIMIT) -> dict[tuple[str, str], list[str]]:
    """(namespace, ResourceClaim name) -> the objects ("Kind/name") whose pod specs name it by `resourceClaimName`.

    Wherever a kind keeps its pod templates, they hold `resourceClaims` lists: each object is walked for them, at
    most `limit` nodes of it (an object beyond that is not searched further; its claims stay unseen)."""
    found: dict[tuple[str, str], list[str]] = {}
    for resource in resources:
        if resource.kind in CLAIM_KINDS or not isinstance(resource.obj, dict):
            continue
        who = f"{resource.kind}/{resource.name}"
        stack: list = [resource.obj]
        budget = limit
        while stack and budget > 0:
            item = stack.pop()
            budget -= 1
            if isinstance(item, dict):
                claims = item.get("resourceClaims")
                for claim in claims if isinstance(claims, list) else ():
                    if isinstance(claim, dict) and isinstance(claim.get("resourceClaimName"), str):
                        holders = found.setdefault((resource.namespace, claim["resourceClaimName"]), [])
                        if who not in holders:
                            holders.append(who)
                stack.extend(v for v in item.values() if isinstance(v, (dict, list)))
            elif isinstance(item, list):
                stack.extend(v for v in item if isinstance(v, (dict, list)))
    return found


def scheduling_policy(pod_group: dict) -> dict:
    """A PodGroup's spec.schedulingPolicy (`gang: {minCount}` or `basic: {}`), {} when it has none readable."""
    spec = pod_group.get("spec")
    policy = spec.get("schedulingPolicy") if isinstance(spec, dict) else None
    return policy if isinstance(policy, dict) else {}
