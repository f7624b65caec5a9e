"""Binding: the variables a rule reads, set in one Activation as the engine walks a resource.

By reference, never copied: `workload`, `object`, `templates` and `cluster`
once per resource (only those some chosen policy reads), `pod`, `podMeta`,
`template` and `container` as the walk enters each template and container, so
a mutation applied to the working copy is seen by every later rule.
"""

from __future__ import annotations

import base64
from typing import Any, Optional

from webhook.cel.environment import Activation
from webhook.cel.runtime import Variables
from webhook.k8s import dra
from webhook.k8s.workload import (Classification, Container, PodTemplate, ShapeError, Workload, build_workload,
                                  template_devices)
from webhook.model.facts import ClusterFacts
from webhook.model.findings import Evaluation
from webhook.model.resource import Resource


class Scope:
    """What one evaluation of one resource knows, shared by every policy of it."""

    resource: Resource
    workload: Optional[Workload]
    facts: ClusterFacts
    cluster: Optional[dict]
    ceiling: Optional[str]  # namespace enforcement label
    evaluation: Evaluation
    variables: frozenset = frozenset()  # CEL variables some chosen policy reads
    chosen: tuple = ()
    bound: bool = False  # CEL variables are bound on the first rule that needs CEL, not before
    devices: Optional[dict] = None  # template position -> its devices, when some rule reads templateDevices
    unreadable: tuple = ()  # pointers of fields reported as input errors: no finding of their own on them
    # Where the context was last entered (engine/core.py): consecutive policies on the same template and container
    # share the binding, so it is made once, not once per policy.
    entered: Optional[tuple] = None
    reads: Optional[tuple] = None  # (variables, cluster facts) the chosen policies read, when the engine knows them
    claims: Any = False  # the namespace's DRA claims as the facts know them (None: unknown); False: not asked yet
    # The config's classification, widened by the DeviceClasses the facts know (k8s/deviceclasses.py): the workload,
    # the CEL bindings and the mutations all classify with this one.
    classification: Optional[Classification] = None
    # Where the resource's templates may be alike: what the evaluation keeps (engine/sharing.Kept), set by the
    # engine; None (the class's): nothing is kept.
    shared: Optional[Any] = None

    def __init__(self, resource: Resource, workload: Optional[Workload], facts: ClusterFacts, cluster: Optional[dict],
                 ceiling: Optional[str], evaluation: Evaluation, variables: frozenset = frozenset(), chosen: tuple = (),
                 bound: bool = False, devices: Optional[dict] = None, unreadable: tuple = (),
                 entered: Optional[tuple] = None, reads: Optional[tuple] = None, claims: Any = False,
                 classification: Optional[Classification] = None) -> None:
        self.resource = resource
        self.workload = workload
        self.facts = facts
        self.cluster = cluster
        self.ceiling = ceiling
        self.evaluation = evaluation
        self.variables = variables
        self.chosen = chosen
        self.bound = bound
        self.devices = devices
        self.unreadable = unreadable
        self.entered = entered
        self.reads = reads
        self.claims = claims
        self.classification = classification


def bind_resource(context: Activation, scope: Scope, chosen: list, classification: Classification,
                  reads: Optional[tuple] = None) -> None:
    """Bind the resource-wide variables the chosen policies read, and the cluster facts they need.

    `reads`: (variables, facts) of `chosen` when the caller knows them already (the engine keeps them per set of
    chosen policies, engine/core.py), else computed here."""
    scope.variables, needed = reads if reads is not None else policy_reads(chosen)
    if needed or "cluster" in scope.variables:
        scope.cluster = cluster_facts(scope, needed, classification)
    variables = scope.variables
    resource, workload = scope.resource, scope.workload
    templates = workload.templates if workload else []
    if "workload" in variables:
        context["workload"] = {
            "kind": resource.kind,
            "name": resource.name,
            "namespace": resource.namespace,
            "labels": resource.labels,
            "annotations": resource.annotations,
            "classes": sorted(workload.classes) if workload else [],
            "role": (workload.role if workload else None) or "",
            "tier": (workload.tier if workload else None) or "",
            "devices": sorted(workload.devices) if workload else [],
            "podCount": workload.pod_count if workload else 0,
        }
    if "object" in variables:
        context["object"] = resource.obj
    # ValidatingAdmissionPolicy's names: the old object of an UPDATE review (inputs/review.py), else null (CREATE,
    # audit); data a rule reads, like `object`, and nothing else of the engine looks at it
    if "oldObject" in variables:
        context["oldObject"] = resource.origin.old_object if resource.origin is not None else None
    if "request" in variables:
        origin = resource.origin
        context["request"] = {
            "kind": {"group": resource.group, "version": resource.api_version.rpartition("/")[2],
                     "kind": resource.kind},
            "name": resource.name, "namespace": resource.namespace,
            "operation": origin.operation if origin is not None and origin.operation else "CREATE",
            "uid": (origin.uid if origin is not None else None) or "",
        }
    if "namespaceObject" in variables:
        labels = scope.facts.namespace_labels(resource.namespace) if resource.namespace else None
        context["namespaceObject"] = None if labels is None else {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": resource.namespace, "labels": labels}}
    if "claimDevices" in variables:
        # a ResourceClaim or ResourceClaimTemplate under review: what it asks for, as a pod's claims are read
        context["claimDevices"] = dra.requests(dra.claim_devices(resource.obj), classification.device_classes) \
            if resource.group == "resource.k8s.io" and resource.kind in (dra.CLAIM, dra.TEMPLATE) else []
    if "cluster" in variables and scope.cluster is not None:
        context["cluster"] = {k: v for k, v in scope.cluster.items() if v is not None}
    if "templates" in variables:
        # Every pod template, for rules about the whole workload (gang admission, spot checkpointing).
        context["templates"] = [{
            "name": t.name, "podCount": t.pod_count, "hasPodSpec": t.spec is not None,
            "spec": t.spec if t.spec is not None else {}, "metadata": t.metadata,
            "containers": [c.obj for c in t.containers],
        } for t in templates]


def policy_reads(chosen: list) -> tuple[frozenset, frozenset]:
    """The CEL variables and the cluster facts some policy of `chosen` reads."""
    return frozenset().union(*(p.variables for p in chosen)), frozenset(f for p in chosen for f in p.requires)


def enter(context: Activation, scope: Scope, template: Optional[PodTemplate], position: Optional[int],
          container: Optional[Container], classification: Classification) -> None:
    """Bind the pod template and container a rule is about to run on."""
    if template is not None:
        context["pod"] = template.spec if template.spec is not None else {}
        context["podMeta"] = template.metadata
        context["template"] = template.name
        if "templateDevices" in scope.variables:
            if scope.devices is None:
                scope.devices = {}
            if position not in scope.devices:
                scope.devices[position] = template_devices(template, classification)
            context["templateDevices"] = scope.devices[position]
        if "podResources" in scope.variables:
            context["podResources"] = pod_resources(template)
        if "podClaims" in scope.variables:
            context["podClaims"] = pod_claims(template, scope, classification)
    if container is not None:
        context["container"] = container.obj
        context["containerType"] = container.section
        context["containerName"] = container.name  # its name, else its field or place: never "?"
        context["injected"] = container.injected  # what the kind's operator mounts in it (kinds.yaml)
        if "envFrom" in scope.variables:
            context["envFrom"] = env_from(container.obj, scope)
        if "claims" in scope.variables:
            resources = container.obj.get("resources")
            context["claims"] = dra.resolve(context.get("pod") or {}, container.obj, known_claims(scope),
                                            classification.device_classes, me(scope)) \
                if resources and "claims" in resources else []
    elif "container" in context:  # a pod-level rule must not see the last template's container
        del context["container"], context["containerType"], context["containerName"], context["injected"]


def pod_resources(template: PodTemplate) -> dict:
    """The template's pod-level resources (`spec.resources`), {} where it has none: what rules read as
    `podResources` (language/declarations.py says why not `pod.resources`)."""
    found = template.spec.get("resources") if template.spec is not None else None
    return found if isinstance(found, dict) else {}


def pod_claims(template: PodTemplate, scope: Scope, classification: Classification) -> list[dict]:
    """The DRA entries of the pod's containers, each (claim, request) once: the pod is allocated a claim's devices
    once, however many of its containers name it. Each entry is a `claims` entry (k8s/dra.py) with `container`,
    the first container naming it, and `running`: some container naming it runs for the pod's life (a container
    or a native sidecar, not a run-to-completion init container)."""
    pod = template.spec if template.spec is not None else {}
    found: dict[tuple, dict] = {}
    for container in template.containers:
        obj = container.obj
        resources = obj.get("resources")
        if not resources or "claims" not in resources or container.section == "ephemeralContainers":
            continue
        running = container.section != "initContainers" or obj.get("restartPolicy") == "Always"
        for entry in dra.resolve(pod, obj, known_claims(scope), classification.device_classes, me(scope)):
            key = (entry["claim"], entry["request"])
            if key in found:
                found[key]["running"] = found[key]["running"] or running
            else:
                found[key] = dict(entry, container=container.name, running=running)
    return list(found.values())


def bind_variables(context: Activation, policy: Any) -> None:
    """A fresh set of the policy's named `variables` for this binding: each evaluated at most once, on first read."""
    if policy.named:
        context["variables"] = Variables(policy.named, context)


def cluster_facts(scope: Scope, needed: frozenset, classification: Classification) -> dict:
    """The cluster facts the chosen policies require; a fact nobody can supply is None (the rule then skips)."""
    facts, resource = scope.facts, scope.resource
    cluster: dict[str, Any] = {}
    if "namespace" in needed:
        labels = facts.namespace_labels(resource.namespace)
        cluster["namespace"] = None if labels is None else {"name": resource.namespace, "labels": labels}
    if "resourceQuotas" in needed:
        cluster["resourceQuotas"] = facts.resource_quotas(resource.namespace)
    if "priorityClasses" in needed:
        cluster["priorityClasses"] = facts.priority_classes()
    if "runtimeClasses" in needed:
        cluster["runtimeClasses"] = facts.runtime_classes()
    if "hpaTarget" in needed:
        cluster["hpaTarget"] = _hpa_target(scope, classification)
    if "nodes" in needed:
        cluster["nodes"] = facts.nodes()
    if "localQueues" in needed:
        cluster["localQueues"] = facts.local_queues(resource.namespace)
    if "podGroups" in needed:
        cluster["podGroups"] = facts.pod_groups(resource.namespace)
    if "resourceClaims" in needed:
        cluster["resourceClaims"] = claim_facts(scope)
    return cluster


NO_CLAIMS: dict = {dra.CLAIM: {}, dra.TEMPLATE: {}, "users": {}}  # a resource whose pods name no claim knows them all


def claim_facts(scope: Scope) -> Optional[dict]:
    """The namespace's DRA claims, templates and their users as the facts know them, or None (unknown) unless
    every claim and template the resource's pods name is among them (a rule about a claim's devices then skips)."""
    if scope.claims is not False:
        return scope.claims
    if scope.workload is None or not any(t.spec and "resourceClaims" in t.spec for t in scope.workload.templates):
        scope.claims = NO_CLAIMS
        return NO_CLAIMS
    named = [n for t in scope.workload.templates if t.spec and "resourceClaims" in t.spec
             for n in dra.named_objects(t.spec)]
    known = scope.facts.resource_claims(scope.resource.namespace) if named else NO_CLAIMS
    if known is not None and any(name not in known.get(kind, {}) for kind, name in named):
        known = None
    scope.claims = known
    return known


def known_claims(scope: Scope) -> Optional[dict]:
    """What the entries of `claims` and `podClaims` are resolved against: every claim the pods name (claim_facts),
    else what the facts know of the namespace's, so each entry's `found` says whether its own claim is known. A rule
    about a claim's devices still skips while any is unknown (`requires: [resourceClaims]` reads claim_facts); one
    about the unknown claims themselves (untrusted-gpu-isolation's no-unknown-claims) reads `found`."""
    known = claim_facts(scope)
    return known if known is not None else scope.facts.resource_claims(scope.resource.namespace)


def me(scope: Scope) -> str:
    """How `users` names the object under review ("Kind/name")."""
    return f"{scope.resource.kind}/{scope.resource.name}"


def _hpa_target(scope: Scope, classification: Classification) -> Optional[dict]:
    ref = (scope.resource.obj.get("spec") or {}).get("scaleTargetRef") or {}
    if not isinstance(ref, dict):
        return None
    # KEDA's ScaledObject may leave the kind out: it then scales an apps/v1 Deployment (KEDA's default).
    default = "Deployment" if scope.resource.kind == "ScaledObject" else ""
    target = scope.facts.find(scope.resource.namespace, str(ref.get("kind") or default), str(ref.get("name", "")))
    if target is None:
        return None
    try:
        workload = build_workload(target, classification)
    except ShapeError:
        workload = None
    return {"kind": target.kind, "name": target.name,
            "classes": sorted(workload.classes) if workload else [],
            "devices": sorted(workload.devices) if workload else []}


# ---------------------------------------------------------------------- envFrom
_NO_ENV_FROM = {"variables": [], "unknown": []}
_SHOWN = 64  # characters of a value kept for messages; a longer one is never a "no device" value anyway


def env_from(container: dict, scope: Scope) -> dict:
    """What a container's `envFrom` loads, as far as the facts know: `{variables: [{name, value, source}],
    unknown: ["ConfigMap x", ...]}`.

    The kubelet's order is followed: later sources override earlier ones, and an explicit `env` entry overrides
    them all (so `env: NVIDIA_VISIBLE_DEVICES=void` neutralises a ConfigMap's `all`). A source the facts do not
    know (not in the audit input; a Secret, which the webhook never reads; a ConfigMap not created yet) is
    `unknown`: the rules say so rather than guess. An `optional` source that is absent is unknown too, since it
    may exist by the time the pod starts.
    """
    sources = container.get("envFrom")
    if not isinstance(sources, list) or not sources:
        return _NO_ENV_FROM
    env = container.get("env")
    explicit = {e.get("name") for e in (env if isinstance(env, list) else ())
                if isinstance(e, dict) and isinstance(e.get("name"), str)}
    found: dict[str, dict] = {}
    unknown: list[str] = []
    for source in sources:
        if not isinstance(source, dict):
            continue
        prefix = source.get("prefix") if isinstance(source.get("prefix"), str) else ""
        for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            ref = source.get(field)
            if not isinstance(ref, dict):
                continue
            name = str(ref.get("name") or "")
            data = _source_data(scope, kind, name)
            if data is None:
                unknown.append(f"{kind} {name}")
                continue
            for key, value in data.items():
                found[prefix + key] = {"name": prefix + key, "value": value[:_SHOWN], "source": f"{kind} {name}"}
    variables = [v for n, v in found.items() if n not in explicit]
    return {"variables": variables, "unknown": unknown}


def _source_data(scope: Scope, kind: str, name: str) -> Optional[dict[str, str]]:
    """The string data of a ConfigMap or Secret in the resource's namespace, or None when unknown."""
    found = scope.facts.find(scope.resource.namespace, kind, name) if name else None
    if found is None or not isinstance(found.obj, dict):
        return None
    data: dict[str, str] = {}
    if kind == "Secret":
        raw = found.obj.get("data")
        for key, value in (raw.items() if isinstance(raw, dict) else ()):
            try:
                data[str(key)] = base64.b64decode(str(value), validate=True).decode("utf-8", "replace")
            except (ValueError, TypeError):
                data[str(key)] = "<not base64>"
        string_data = found.obj.get("stringData")  # written by people; the API server merges it into data
        for key, value in (string_data.items() if isinstance(string_data, dict) else ()):
            data[str(key)] = str(value)
        return data
    raw = found.obj.get("data")
    for key, value in (raw.items() if isinstance(raw, dict) else ()):
        data[str(key)] = value if isinstance(value, str) else str(value)
    return data
