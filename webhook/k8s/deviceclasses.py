"""Extended resources backed by DRA DeviceClasses (Kubernetes 1.34+, DRAExtendedResource).

A DeviceClass may name an extended resource in `spec.extendedResourceName`: a pod
that asks for that name in `resources.limits` (as it would ask a device plugin)
gets devices of the class through a claim the scheduler makes for it. So the
name is an accelerator exactly when the class is one (the config's
`acceleratorDeviceClasses`); the implicit name
`deviceclass.resource.kubernetes.io/<class>` is matched by the classifier
itself (workload.py). The names come from the DeviceClasses the facts know
(`extended_resources()`: the audit input's DeviceClasses); a name no known
DeviceClass gives stays what the config's `accelerators` list says.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Iterable, Optional

from webhook.k8s.dra import is_accelerator_class
from webhook.k8s.workload import Classification


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
    return dataclasses.replace(classification, accelerators=classification.accelerators + added)


def _accelerator_names(extended: Iterable[tuple[str, str]], classes: tuple[str, ...]) -> list[str]:
    # A glob character in a resource name would widen the patterns: such a name is no valid resource name anyway.
    return [name for name, device_class in extended
            if is_accelerator_class(device_class, classes) and not any(c in name for c in "*?[")]
