"""Extended resources backed by DRA DeviceClasses (Kubernetes 1.34+, DRAExtendedResource).

A DeviceClass may name an extended resource in `spec.extendedResourceName`: a pod
that asks for that name in `resources.limits` (as it would ask a device plugin)
gets devices of the class through a claim the scheduler makes for it. So the
name is an accelerator exactly when the class is one (the config's
`acceleratorDeviceClasses`); the implicit name
`deviceclass.resource.kubernetes.io/<class>` is matched by the classifier
itself (workload.py). The names come from the DeviceClasses the facts know
(`extended_resources()`: the audit input's DeviceClasses, or the webhook's live
cache of them); a name no known DeviceClass gives stays what the config's
`accelerators` list says.

When facts that should know every DeviceClass do not (the webhook's cache not
synced yet, or stale), a pod's extended resource might be any class's. For an
untrusted pod the strict reading holds (`presumed`): every domain-qualified
extended resource it asks for that is neither an accelerator already nor one of
the config's `nonAccelerators` is read as an accelerator, so the GPU rules judge
it; never less scrutiny than a known DeviceClass would give. A trusted pod is
judged by the config's lists, with a note naming the names it could not check.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Optional

from webhook.k8s.dra import is_accelerator_class
from webhook.k8s.workload import Classification, Workload
from webhook.model.valueclass import replace
from webhook.model.globs import any_matches


def accelerated(classification: Classification, extended: Optional[dict[str, str]]) -> Classification:
    """`classification` with the extended resource names of accelerator DeviceClasses counted as accelerators
    (`extended`: name -> DeviceClass, as the facts know them; None or {}: the classification as it is)."""
    if not extended:
        return classification
    return _widened(classification, tuple(sorted(extended.items())))


@lru_cache(maxsize=64)
def _widened(classification: Classification, extended: tuple[tuple[str, str], ...]) -> Classification:
    names = _accelerator_names(extended, classification.device_classes)
    added = tuple(n for n in names if not classification.is_accelerator(n))
    if not added:
        return classification
    return replace(classification, accelerators=classification.accelerators + added)


def _accelerator_names(extended: Iterable[tuple[str, str]], classes: tuple[str, ...]) -> list[str]:
    # A glob character in a resource name would widen the patterns: such a name is no valid resource name anyway.
    return [name for name, device_class in extended
            if is_accelerator_class(device_class, classes) and not any(c in name for c in "*?[")]


def unchecked(workload: Optional[Workload], classification: Classification) -> list[str]:
    """The extended resources the workload's containers ask for (limits or requests) that a DeviceClass could back
    and the classification does not already decide: domain-qualified (`domain/name`), outside Kubernetes' own
    `kubernetes.io` names (which no DeviceClass may name), not an accelerator, not one of `nonAccelerators`."""
    if workload is None:
        return []
    found = set()
    for template in workload.templates:
        for container in template.containers:
            resources = container.obj.get("resources")
            for section in ("limits", "requests"):
                names = resources.get(section) if isinstance(resources, dict) else None
                for name in names if isinstance(names, dict) else ():
                    if isinstance(name, str) and _could_be_backed(name, classification):
                        found.add(name)
    return sorted(found)


def presumed(classification: Classification, names: list[str]) -> Classification:
    """`classification` with `names` counted as accelerators (each matched as itself, never as a glob)."""
    if not names:
        return classification
    import glob  # for its escape only, and only here: importing it compiled two patterns in every process

    return replace(classification,
                               accelerators=classification.accelerators + tuple(glob.escape(n) for n in names))


def _could_be_backed(name: str, classification: Classification) -> bool:
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False  # a native resource: DeviceClass validation refuses these as extendedResourceName
    if classification.is_accelerator(name):
        return False
    return not any_matches(name, classification.non_accelerators)
