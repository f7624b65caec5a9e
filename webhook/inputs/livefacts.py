"""Cluster facts kept in memory by list+watch: no API call while a review is answered.

Each resource type has a `Cache`: one thread lists it, then watches from the
list's resourceVersion (with bookmarks), re-lists when the watch expires (410
Gone) and anyway every `resync` seconds. A cache is *fresh* while it was
confirmed current (a list, an event, a bookmark, or a watch that ended
normally) within `max_age` seconds. A fact whose cache is not fresh is
answered `None` ("unknown"), never an empty answer: the engine then applies the
configured context-failure mode (`skip` by default) to the rules that need it,
while every other policy keeps working.

HPA targets: Deployments and StatefulSets are cached as a slim projection
(labels and the pod templates' container resources: what classification
needs), so memory stays small on large clusters. Any other target kind is
unknown. ConfigMaps (what `envFrom` loads) are kept as their data with short
values only; Secrets are never read. What each type keeps is
webhook/inputs/projections.py's.

DeviceClasses are kept for the extended resource each may name
(`extended_resources()`): while that cache is not fresh the answer is None, and
the engine then reads every domain-qualified extended resource of an untrusted
pod as an accelerator (engine/core.py), never as nothing.

The transport (`run`) is separate from the bookkeeping (`Cache.replace` /
`Cache.apply`), which is what tests drive with real objects.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from webhook.inputs.projections import (claim_projection, configmap_projection, deviceclass_projection,
                                        labels_projection, policy_projection, slim_workload)
from webhook.model.facts import scheduling_policy
from webhook.model.resource import Origin, Resource

log = logging.getLogger("aiadmit.livefacts")

WATCH_SECONDS = 50      # server-side timeout of one watch call: at least this often a cache is re-confirmed
MAX_AGE_SECONDS = 120   # beyond this without confirmation a cache answers "unknown"
RESYNC_SECONDS = 600    # full re-list, whatever the watch says
TARGET_KINDS = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
FOUND_KINDS = {**TARGET_KINDS, "ConfigMap": "configmaps"}  # what `find` answers; never Secrets (see below)
# Kueue's LocalQueues (a cluster without Kueue has none), at the first version the API server serves: Kueue serves
# only v1beta2 since v0.20, both from v0.15, only v1beta1 before.
KUEUE_GROUP, KUEUE_PLURAL, KUEUE_VERSIONS = "kueue.x-k8s.io", "localqueues", ("v1beta2", "v1beta1")
# Kubernetes' PodGroups (gang scheduling): scheduling.k8s.io/v1beta1 in 1.37, v1alpha2 in 1.36; both off by default,
# and an API server that serves neither has none (it drops a pod's schedulingGroup with the gate off, too).
PODGROUP_GROUP, PODGROUP_PLURAL, PODGROUP_VERSIONS = "scheduling.k8s.io", "podgroups", ("v1beta1", "v1alpha2")
# DRA claims, the templates pods make them from, and the DeviceClasses whose extended resources pods may ask for:
# resource.k8s.io/v1 (GA since 1.34, served by 1.35-1.37).
DRA_API = "resource.k8s.io/v1"


def _key(obj: dict) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class Cache:
    """The current objects of one resource type, swapped whole on every change (readers never lock)."""

    def __init__(self, name: str, kind: str, api_version: str, project: Optional[Callable[[dict], dict]] = None,
                 clock: Callable[[], float] = time.monotonic, optional: bool = False):
        self.name = name
        self.optional = optional  # a CRD's resource: while the API serves none (404), there are none of them
        self.kind = kind
        self.api_version = api_version
        self.project = project
        self.clock = clock
        self.items: dict[tuple[str, str], dict] = {}
        self.synced = False
        self.confirmed: Optional[float] = None
        self.resource_version: Optional[str] = None
        self.failures = 0
        self._view: Optional[tuple] = None

    def _prepare(self, obj: dict) -> dict:
        obj = dict(obj)
        obj.setdefault("kind", self.kind)
        obj.setdefault("apiVersion", self.api_version)
        return self.project(obj) if self.project else obj

    def replace(self, items: list[dict], resource_version: Optional[str]) -> None:
        self.items = {_key(o): self._prepare(o) for o in items if isinstance(o, dict)}
        self.resource_version = resource_version
        self.synced = True
        self.confirm()

    def apply(self, event_type: str, obj: dict) -> None:
        """One watch event (ADDED, MODIFIED, DELETED, BOOKMARK)."""
        if not isinstance(obj, dict):
            return
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if event_type in ("ADDED", "MODIFIED"):
            items = dict(self.items)
            items[_key(obj)] = self._prepare(obj)
            self.items = items
        elif event_type == "DELETED":
            items = dict(self.items)
            items.pop(_key(obj), None)
            self.items = items
        elif event_type != "BOOKMARK":
            return
        if version:
            self.resource_version = version
        self.confirm()

    def confirm(self) -> None:
        self.confirmed = self.clock()
        self.failures = 0

    def age(self) -> Optional[float]:
        return None if self.confirmed is None else self.clock() - self.confirmed

    def view(self, make: Callable[[dict], Any]) -> Any:
        """`make(items)`, remembered until the items change: a map of every Node is built once per change, not per
        review."""
        items = self.items
        if self._view is None or self._view[0] is not items:
            self._view = (items, make(items))
        return self._view[1]

    def fresh(self, max_age: float) -> bool:
        age = self.age()
        return self.synced and age is not None and age <= max_age


@dataclass
class _Source:
    cache: Cache
    list_call: Callable  # a kubernetes client list_* method (all namespaces)


class FirstServed:
    """The list call of a custom resource at the first of its versions (newest first) that the API server serves;
    the version that answered is asked first next time. Only when none is served does the 404 reach the caller (for
    an optional cache: none exist)."""

    def __init__(self, call: Callable, group: str, versions: tuple[str, ...], plural: str):
        self.call, self.group, self.versions, self.plural = call, group, versions, plural
        self.version = versions[0]

    def __call__(self, **kwargs):
        from kubernetes.client.rest import ApiException

        order = [self.version] + [v for v in self.versions if v != self.version]
        for position, version in enumerate(order):
            try:
                result = self.call(self.group, version, self.plural, **kwargs)
            except ApiException as exc:
                if exc.status != 404 or position == len(order) - 1:
                    raise
                continue
            self.version = version
            return result


class LiveFacts:
    """`ClusterFacts` from list+watch caches; `start()` runs one daemon thread per resource type."""

    complete = True  # every namespace is listed: one it cannot answer for is unknown, never one without a tier

    def __init__(self, api_client=None, max_age: float = MAX_AGE_SECONDS, resync: float = RESYNC_SECONDS,
                 watch_seconds: int = WATCH_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.api_client = api_client
        self.max_age = max_age
        self.resync = resync
        self.watch_seconds = watch_seconds
        self.clock = clock
        self.caches = {
            "namespaces": Cache("namespaces", "Namespace", "v1", clock=clock),
            "resourcequotas": Cache("resourcequotas", "ResourceQuota", "v1", clock=clock),
            "priorityclasses": Cache("priorityclasses", "PriorityClass", "scheduling.k8s.io/v1", clock=clock),
            "runtimeclasses": Cache("runtimeclasses", "RuntimeClass", "node.k8s.io/v1", clock=clock),
            "deployments": Cache("deployments", "Deployment", "apps/v1", slim_workload, clock=clock),
            "statefulsets": Cache("statefulsets", "StatefulSet", "apps/v1", slim_workload, clock=clock),
            "configmaps": Cache("configmaps", "ConfigMap", "v1", configmap_projection, clock=clock),
            "nodes": Cache("nodes", "Node", "v1", labels_projection, clock=clock),
            "localqueues": Cache("localqueues", "LocalQueue", f"{KUEUE_GROUP}/{KUEUE_VERSIONS[0]}", labels_projection,
                                 clock=clock, optional=True),
            "podgroups": Cache("podgroups", "PodGroup", f"{PODGROUP_GROUP}/{PODGROUP_VERSIONS[0]}", policy_projection,
                               clock=clock, optional=True),
            "resourceclaims": Cache("resourceclaims", "ResourceClaim", DRA_API, claim_projection, clock=clock),
            "resourceclaimtemplates": Cache("resourceclaimtemplates", "ResourceClaimTemplate", DRA_API,
                                            claim_projection, clock=clock),
            "deviceclasses": Cache("deviceclasses", "DeviceClass", DRA_API, deviceclass_projection, clock=clock),
        }
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ facts
    def _fresh(self, name: str) -> Optional[Cache]:
        cache = self.caches[name]
        return cache if cache.fresh(self.max_age) else None

    def namespace_labels(self, namespace: str) -> Optional[dict]:
        cache = self._fresh("namespaces")
        obj = cache.items.get(("", namespace)) if cache else None
        if obj is None:
            return None
        return dict((obj.get("metadata") or {}).get("labels") or {})

    def resource_quotas(self, namespace: str) -> Optional[list[dict]]:
        cache = self._fresh("resourcequotas")
        if cache is None:
            return None
        return [o for (ns, _), o in cache.items.items() if ns == namespace]

    def priority_classes(self) -> Optional[dict[str, dict]]:
        cache = self._fresh("priorityclasses")
        return None if cache is None else {name: obj for (_, name), obj in cache.items.items()}

    def runtime_classes(self) -> Optional[list[str]]:
        cache = self._fresh("runtimeclasses")
        return None if cache is None else sorted(name for (_, name) in cache.items)

    def nodes(self) -> Optional[dict[str, dict]]:
        cache = self._fresh("nodes")
        return None if cache is None else cache.view(lambda items: {
            name: (obj.get("metadata") or {}).get("labels") or {} for (_, name), obj in items.items()})

    def local_queues(self, namespace: str) -> Optional[list[str]]:
        cache = self._fresh("localqueues")
        return None if cache is None else sorted(name for (ns, name) in cache.items if ns == namespace)

    def pod_groups(self, namespace: str) -> Optional[dict[str, dict]]:
        cache = self._fresh("podgroups")
        return None if cache is None else {name: scheduling_policy(obj) for (ns, name), obj in cache.items.items()
                                           if ns == namespace}

    def resource_claims(self, namespace: str) -> Optional[dict]:
        """The namespace's claims and templates, and who uses each claim: the pods its status reserves it for, and
        the Deployments and StatefulSets whose template names it (known only while all those caches are fresh)."""
        claims, templates = self._fresh("resourceclaims"), self._fresh("resourceclaimtemplates")
        workloads = [self._fresh(name) for name in TARGET_KINDS.values()]
        if claims is None or templates is None or None in workloads:
            return None
        users: dict[str, list[str]] = {}
        for (ns, name), obj in claims.items.items():
            if ns == namespace:
                users[name] = [f"{'Pod' if r.get('resource') == 'pods' else r.get('resource')}/{r.get('name')}"
                               for r in (obj.get("status") or {}).get("reservedFor") or ()]
        for cache in workloads:
            for (ns, name), obj in cache.items.items():
                pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
                for claim in pod.get("resourceClaims") or () if ns == namespace else ():
                    if isinstance(claim, dict) and isinstance(claim.get("resourceClaimName"), str):
                        users.setdefault(claim["resourceClaimName"], []).append(f"{obj.get('kind')}/{name}")
        return {"ResourceClaim": {name: obj for (ns, name), obj in claims.items.items() if ns == namespace},
                "ResourceClaimTemplate": {name: obj for (ns, name), obj in templates.items.items() if ns == namespace},
                "users": users}

    def extended_resources(self) -> Optional[dict[str, str]]:
        """Extended resource name -> the DeviceClass that names it in `spec.extendedResourceName` (built once per
        change of the cache), or None while the DeviceClasses are not known for sure (not synced, or stale)."""
        cache = self._fresh("deviceclasses")
        return None if cache is None else cache.view(lambda items: {
            obj["spec"]["extendedResourceName"]: name for (_, name), obj in items.items() if "spec" in obj})

    def find(self, namespace: str, kind: str, name: str) -> Optional[Resource]:
        resource = FOUND_KINDS.get(kind)
        cache = self._fresh(resource) if resource else None
        obj = cache.items.get((namespace, name)) if cache else None
        return Resource(obj, Origin(cluster="live")) if obj is not None else None

    # ------------------------------------------------------------------ state
    def synced(self) -> bool:
        return all(c.synced for c in self.caches.values())

    def ages(self) -> dict[str, Optional[float]]:
        return {name: cache.age() for name, cache in self.caches.items()}

    # ------------------------------------------------------------------ transport
    def _sources(self) -> list[_Source]:
        from kubernetes import client

        def own() -> Any:
            """A client (and connection pool) per watch thread, never shared: in `aiadmit serve` sockets are gevent's,
            each bound to the OS thread that opened it, and a pooled connection handed to another thread fails
            ("Cannot switch to a different thread"; seen in tests/e2e after the rotation test's burst)."""
            return client.ApiClient(self.api_client.configuration) if self.api_client is not None else None

        return [
            _Source(self.caches["namespaces"], client.CoreV1Api(own()).list_namespace),
            _Source(self.caches["resourcequotas"], client.CoreV1Api(own()).list_resource_quota_for_all_namespaces),
            _Source(self.caches["priorityclasses"], client.SchedulingV1Api(own()).list_priority_class),
            _Source(self.caches["runtimeclasses"], client.NodeV1Api(own()).list_runtime_class),
            _Source(self.caches["deployments"], client.AppsV1Api(own()).list_deployment_for_all_namespaces),
            _Source(self.caches["statefulsets"], client.AppsV1Api(own()).list_stateful_set_for_all_namespaces),
            _Source(self.caches["configmaps"], client.CoreV1Api(own()).list_config_map_for_all_namespaces),
            _Source(self.caches["nodes"], client.CoreV1Api(own()).list_node),
            _Source(self.caches["localqueues"],
                    FirstServed(client.CustomObjectsApi(own()).list_cluster_custom_object, KUEUE_GROUP,
                                KUEUE_VERSIONS, KUEUE_PLURAL)),
            _Source(self.caches["podgroups"],
                    FirstServed(client.CustomObjectsApi(own()).list_cluster_custom_object, PODGROUP_GROUP,
                                PODGROUP_VERSIONS, PODGROUP_PLURAL)),
            _Source(self.caches["resourceclaims"],
                    client.ResourceV1Api(own()).list_resource_claim_for_all_namespaces),
            _Source(self.caches["resourceclaimtemplates"],
                    client.ResourceV1Api(own()).list_resource_claim_template_for_all_namespaces),
            _Source(self.caches["deviceclasses"], client.ResourceV1Api(own()).list_device_class),
        ]

    def start(self) -> "LiveFacts":
        for source in self._sources():
            thread = threading.Thread(target=self.run, args=(source,), name=f"livefacts-{source.cache.name}",
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()

    def run(self, source: _Source) -> None:
        """List, then watch until the resync is due, the watch expires, or the API server fails; repeat."""
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        cache = source.cache
        while not self._stop.is_set():
            try:
                response = source.list_call(_preload_content=False, _request_timeout=(5, 30))
                data = json.loads(response.data)
                cache.replace(data.get("items") or [], (data.get("metadata") or {}).get("resourceVersion"))
                resync_at = self.clock() + self.resync
                while not self._stop.is_set() and self.clock() < resync_at:
                    stream = watch.Watch()
                    for event in stream.stream(source.list_call, resource_version=cache.resource_version,
                                               timeout_seconds=self.watch_seconds, allow_watch_bookmarks=True,
                                               deserialize=False,
                                               _request_timeout=(5, self.watch_seconds + 15)):
                        cache.apply(event.get("type", ""), event.get("object"))
                        if self._stop.is_set():
                            stream.stop()
                            break
                    cache.confirm()  # the watch ran its course: the API server is there and we missed nothing
            except ApiException as exc:
                if exc.status == 410:
                    continue  # expired resourceVersion: re-list at once
                if exc.status == 404 and cache.optional:  # the CRD is not installed: none exist; ask again as often
                    cache.replace([], None)               # as a watch would have renewed (fresh, and Kueue found soon)
                    self._stop.wait(self.watch_seconds)
                    continue
                self._failed(cache, f"API error {exc.status}: {exc.reason}")
            except Exception as exc:  # network errors, timeouts, bad payloads: retry with backoff
                self._failed(cache, f"{type(exc).__name__}: {exc}")

    def _failed(self, cache: Cache, why: str) -> None:
        cache.failures += 1
        delay = min(30.0, 0.5 * 2 ** min(cache.failures, 6))
        log.warning(json.dumps({"msg": "context cache failed", "resource": cache.name, "error": why[:300],
                                "retry_in_s": delay}))
        self._stop.wait(delay)
