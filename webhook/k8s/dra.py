"""Devices through Dynamic Resource Allocation (resource.k8s.io/v1): what a claim asks for, and who holds it.

A container holds DRA devices when its `resources.claims` names one of the
pod's `spec.resourceClaims`; that entry names a ResourceClaim (shared by every
pod that names it) or a ResourceClaimTemplate (one claim made per pod). The
devices are in the claim's `spec.devices.requests`, each either `exactly` one
kind of device (`count`, default 1, or `allocationMode: All`) or a list of
`firstAvailable` alternatives. Rules read the result as plain entries (one per
request a container receives), so no policy walks these shapes in CEL:

    {claim, source, object, found, request, deviceClass, classes, acceleratorClasses,
     accelerator, count, all, firstAvailable, adminAccess, capacity, partial, sharing, shared, users}

`count` is the fewest devices the request can give: `All` is at least one
(the node decides how many), `firstAvailable` the smallest alternative.
Only device classes the config calls accelerators count as devices: a claim
for a NIC or an IMEX channel is not a GPU. `sharing` is the strategy a driver
config sets for the request (NVIDIA's `GpuConfig`/`MigDeviceConfig`
`sharing.strategy: TimeSlicing|MPS`), `capacity` the part of a device's
capacity it asks for (consumable capacity; `partial` when it asks for any), `shared` says the pod names the
claim itself (`resourceClaimName`), which every pod naming it shares, and
`users` lists the other objects the facts show using that claim.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from webhook.k8s.containers import ShapeError
from webhook.model.globs import any_matches

CLAIM, TEMPLATE = "ResourceClaim", "ResourceClaimTemplate"
# What `extendedResourceName` a DeviceClass gets when it names none (Kubernetes 1.34+, DRAExtendedResource).
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"


def is_accelerator_class(name: str, patterns: Iterable[str]) -> bool:
    return any_matches(name, patterns)


def claim_devices(obj: Any) -> Optional[dict]:
    """`spec.devices` of a ResourceClaim, or of the claims a ResourceClaimTemplate makes; None when it has none."""
    if not isinstance(obj, dict):
        return None
    spec = obj.get("spec")
    if obj.get("kind") == TEMPLATE:
        spec = spec.get("spec") if isinstance(spec, dict) else None
    devices = spec.get("devices") if isinstance(spec, dict) else None
    return devices if isinstance(devices, dict) else None


def _count(exact: dict) -> tuple[int, bool]:
    if exact.get("allocationMode") == "All":
        return 1, True
    count = exact.get("count", 1)
    return (count if isinstance(count, int) and not isinstance(count, bool) else 1), False


def _capacity(exact: dict) -> dict:
    capacity = exact.get("capacity")
    requests = capacity.get("requests") if isinstance(capacity, dict) else None
    return {str(k): str(v) for k, v in requests.items()} if isinstance(requests, dict) else {}


def _sharing(devices: dict) -> dict[Optional[str], str]:
    """Request name (None: every request) -> the sharing strategy a driver config sets for it."""
    found: dict[Optional[str], str] = {}
    for config in devices.get("config") or ():
        if not isinstance(config, dict):
            continue
        opaque = config.get("opaque")
        params = opaque.get("parameters") if isinstance(opaque, dict) else None
        sharing = params.get("sharing") if isinstance(params, dict) else None
        strategy = sharing.get("strategy") if isinstance(sharing, dict) else None
        if not isinstance(strategy, str) or not strategy:
            continue
        names = config.get("requests")
        for name in (names if isinstance(names, list) and names else (None,)):
            found[str(name).split("/")[0] if name is not None else None] = strategy
    return found


def requests(devices: Optional[dict], classes: Iterable[str]) -> list[dict]:
    """One entry per request of a claim's `spec.devices` (see the module docstring), without the claim's names."""
    if devices is None:
        return []
    patterns = tuple(classes)
    sharing = _sharing(devices)
    out = []
    for request in devices.get("requests") or ():
        if not isinstance(request, dict):
            continue
        name = str(request.get("name") or "")
        alternatives = request.get("firstAvailable")
        if isinstance(alternatives, list) and alternatives:
            options = [a for a in alternatives if isinstance(a, dict)]
        else:
            exact = request.get("exactly")
            options = [exact if isinstance(exact, dict) else {}]
        kinds = [str(o.get("deviceClassName") or "") for o in options]
        accelerated = [o for o in options if is_accelerator_class(str(o.get("deviceClassName") or ""), patterns)]
        counted = [_count(o) for o in accelerated] or [_count(o) for o in options]
        count, every = min(counted) if counted else (1, False)
        capacity: dict = {}
        for option in options:
            capacity.update(_capacity(option))
        out.append({
            "request": name, "deviceClass": str((accelerated or options or [{}])[0].get("deviceClassName") or ""),
            "classes": kinds, "acceleratorClasses": sorted({str(o.get("deviceClassName") or "") for o in accelerated}),
            "accelerator": bool(accelerated), "count": count, "all": every,
            "firstAvailable": len(options) > 1 or isinstance(alternatives, list),
            "adminAccess": any(o.get("adminAccess") is True for o in options),
            "capacity": capacity, "partial": bool(capacity), "sharing": sharing.get(name, sharing.get(None, "")),
        })
    return out


def pod_claims(pod: dict) -> dict[str, dict]:
    """The pod's `spec.resourceClaims` by name (entries that are not maps are left to the API server's schema)."""
    claims = pod.get("resourceClaims")
    return {str(c.get("name")): c for c in (claims if isinstance(claims, list) else ()) if isinstance(c, dict)}


def container_claims(container: dict) -> list[dict]:
    resources = container.get("resources")
    claims = resources.get("claims") if isinstance(resources, dict) else None
    return [c for c in (claims if isinstance(claims, list) else ()) if isinstance(c, dict)]


def undeclared(pod: dict, containers: Iterable[tuple[str, dict]]) -> list[ShapeError]:
    """A container naming a claim the pod does not declare: the API server rejects the pod, so it is an input error
    (at the container's `resources.claims` entry), never a device silently not counted."""
    declared = pod_claims(pod)
    errors = []
    for pointer, container in containers:
        for position, claim in enumerate(container_claims(container)):
            name = claim.get("name")
            if not isinstance(name, str) or name not in declared:  # a name that is no string names nothing
                errors.append(ShapeError(f"{pointer}/resources/claims/{position}",
                                         f"resources.claims[{position}] names claim {name!r}, which the pod does not "
                                         f"declare in spec.resourceClaims ({', '.join(sorted(declared)) or 'none'})"))
    return errors


def named_objects(pod: dict) -> list[tuple[str, str]]:
    """(kind, name) of each ResourceClaim and ResourceClaimTemplate the pod's claims name."""
    out = []
    for claim in pod_claims(pod).values():
        if isinstance(claim.get("resourceClaimName"), str):
            out.append((CLAIM, claim["resourceClaimName"]))
        elif isinstance(claim.get("resourceClaimTemplateName"), str):
            out.append((TEMPLATE, claim["resourceClaimTemplateName"]))
    return out


def resolve(pod: dict, container: dict, known: Optional[dict], classes: Iterable[str], me: str = "") -> list[dict]:
    """The DRA entries of one container: each request of each claim it names (only the one request it names, when
    its `resources.claims` entry says `request`). `known` is the namespace's claims as the facts give them
    ({"ResourceClaim": {name: obj}, "ResourceClaimTemplate": {...}, "users": {claim name: [who]}}), None when
    unknown; a claim whose object is not known is one entry with `found: false`. `me` is the object under review
    ("Kind/name"), left out of `users` with the pods named after it (a live claim's `reservedFor` lists them)."""
    declared = pod_claims(pod)
    out = []
    for use in container_claims(container):
        entry = declared.get(str(use.get("name")))
        if entry is None:
            continue  # an input error (undeclared), reported where the workload is read
        if isinstance(entry.get("resourceClaimName"), str):
            source, name = CLAIM, entry["resourceClaimName"]
        else:
            source, name = TEMPLATE, str(entry.get("resourceClaimTemplateName") or "")
        obj = (known or {}).get(source, {}).get(name)
        own = f"Pod/{me.partition('/')[2]}-"  # the pods its controller makes are named after it
        users = [u for u in (known or {}).get("users", {}).get(name, ())
                 if u != me and not u.startswith(own)] if source == CLAIM else []
        base = {"claim": str(use.get("name")), "source": source, "object": name, "found": obj is not None,
                "shared": source == CLAIM, "users": users}
        wanted = str(use.get("request") or "").split("/")[0]
        found = [r for r in requests(claim_devices(obj), classes) if not wanted or r["request"] == wanted]
        if obj is None:
            out.append(dict(base, request=wanted, deviceClass="", classes=[], acceleratorClasses=[], accelerator=False,
                            count=0, all=False,
                            firstAvailable=False, adminAccess=False, capacity={}, partial=False, sharing=""))
        for request in found:
            out.append(dict(base, **request))
    return out
