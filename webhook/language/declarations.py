"""What a rule may read, by level: every variable the engine binds (engine/binding.py), with its type.

Why declared: a rule that names something the engine never binds (`contaner`,
`workload.knd`) cannot pass or fail on any data, only error, and errors fail
closed; so it must not load (cel/checker.py reports it with file:line:col).
JSON-shaped Kubernetes objects are `dyn` (their fields are whatever the API
server accepted); aiadmit's own variables are closed structs, so a misspelt
field of `workload`, `cluster` or a `templates` item is caught too.
A rule's level is its target: `object` (once per resource), `pod` (per pod
template), `container` (per container; a container policy's pod-level rule is
at `pod`). Mutations are at their target as well.
"""

from __future__ import annotations

from typing import Optional

from webhook.cel.constants import DYN, Struct

_STRINGS = ("list", "string")
_LABELS = ("map", "string", DYN)

WORKLOAD = Struct("workload", {
    "kind": "string", "name": "string", "namespace": "string", "labels": _LABELS, "annotations": _LABELS,
    "classes": _STRINGS, "role": "string", "tier": "string", "devices": _STRINGS, "podCount": "int",
})
TEMPLATE = Struct("a templates item", {
    "name": "string", "podCount": "int", "hasPodSpec": "bool", "spec": DYN, "metadata": DYN,
    "containers": ("list", DYN),
})
CLUSTER = Struct("cluster", {
    "namespace": DYN, "resourceQuotas": ("list", DYN), "priorityClasses": ("map", "string", DYN),
    "runtimeClasses": _STRINGS, "hpaTarget": DYN, "nodes": ("map", "string", DYN), "localQueues": _STRINGS,
    "podGroups": ("map", "string", DYN), "resourceClaims": DYN,
})

# ValidatingAdmissionPolicy's names beside aiadmit's: `object`, `oldObject` (the stored object on an UPDATE review;
# null on CREATE and in an audit), `request` (what aiadmit knows of the admission request:
# kind, name, namespace, operation, uid), `namespaceObject` (the namespace with its labels, when the facts know it).
# `claimDevices`: the device requests of a ResourceClaim or ResourceClaimTemplate under review (k8s/dra.py), else [].
OBJECT = {"object": DYN, "oldObject": DYN, "request": DYN, "namespaceObject": DYN,
          "workload": WORKLOAD, "templates": ("list", TEMPLATE), "cluster": CLUSTER, "claimDevices": ("list", DYN)}
# `podResources`: the pod-level resources (`spec.resources`, Kubernetes 1.34+: cpu, memory, hugepages) of the
# template, {} where it declares none or the kind has no pod spec. Not `pod.resources`: a rule that reads `pod` does
# not run where a kind has no pod spec (TrainJob's trainer), and a container rule that merely lets the pod's budget
# stand for the container's must still run there.
# `podClaims`: the DRA entries (as `claims`) of the pod's containers, each (claim, request) once (the pod gets a
# claim's devices once), with `container`, the first one naming it, and `running`: one naming it runs for the
# pod's life (a container or native sidecar, not a run-to-completion init container).
POD = dict(OBJECT, pod=DYN, podMeta=DYN, template="string", templateDevices=_STRINGS, podResources=DYN,
           podClaims=("list", DYN))
# `containerName`: the container's name, else its field (KServe's `sklearn`, a TrainJob's `trainer`), else its
# place (`containers[0]`): what a message says, without `has(container.name) ? container.name : containerType`.
# `injected`: what the kind's operator adds to the container (kinds.yaml `injects`), a list of maps.
# `envFrom`: what the container's envFrom loads as far as the facts know ({variables, unknown}).
# `claims`: the DRA device requests the container's resources.claims give it (k8s/dra.py), one entry each.
CONTAINER = dict(POD, container=DYN, containerType="string", containerName="string", injected=("list", DYN),
                 envFrom=DYN, claims=("list", DYN))
LEVELS = {"object": OBJECT, "pod": POD, "container": CONTAINER}


def for_level(level: str, variables: Optional[Struct] = None) -> dict:
    """The declarations of a rule or mutation at `level` (object, pod or container), with the policy's named
    `variables` readable at that level, if any."""
    if variables is None:
        return LEVELS[level]
    return dict(LEVELS[level], variables=variables)
