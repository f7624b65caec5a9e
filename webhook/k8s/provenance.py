"""Provenance: which owner's check already covers an object a controller derives from it (kinds.yaml `derives`).

A controller creates objects from others: the ReplicaSet controller makes Pods from a ReplicaSet's template, the
Volcano controller makes Pods from a Volcano Job. When the owner went through this webhook, in the same namespace
(ownerReferences never cross namespaces) and so at the same tier, and the child is made from the owner's content
alone, the child's findings are the owner's, already judged (and perhaps admitted under `warn`, an exception or
an enforcement label): lowering them keeps such workloads running. Trust is given by what was checked, never by
who asks or what an object says: an owner kind this table does not list (Volcano's JobFlow, whose pods no check
ever saw), a cluster-scoped owner (checked with no namespace, so no tier), or a child mixed from the owner and
something else (`derivesPartly`: a TrainJob's JobSet is its runtime's template) is judged as if the tenant had
written it. docs/security.md, invariant (c).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

from webhook.k8s.kindnames import KINDS_FILE, table_data


def kind_name(group: str, kind: str) -> str:
    """How the table names a kind: `Kind` in the core group, else `Kind.group`."""
    return f"{kind}.{group}" if group else kind


@lru_cache(maxsize=None)
def derivations(path: str = KINDS_FILE) -> dict[tuple[str, str], frozenset[str]]:
    """(group, kind) of each namespaced owner -> the kinds its controller makes from its content alone."""
    return {(entry.get("group", ""), entry["kind"]): frozenset(entry.get("derives") or ())
            for entry in table_data(path)["kinds"] if entry.get("scope") != "Cluster"}


def _group(api_version: Any) -> Optional[str]:
    if not isinstance(api_version, str) or not api_version:
        return None
    return api_version.rpartition("/")[0]


def deriving_owner(obj: dict, group: str, kind: str) -> Optional[tuple[str, str]]:
    """The (group, kind) of the object's controller owner when that owner's check covers this object, else None.

    Only the controller reference counts (`controller: true`; at most one is allowed), and only when the kinds table
    says that kind derives `kind` in `group` wholly: the owner's check then saw every field of this object."""
    metadata = obj.get("metadata")
    owners = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    if not isinstance(owners, list):
        return None
    table = derivations()
    for owner in owners:
        if not isinstance(owner, dict) or owner.get("controller") is not True:
            continue
        key = (_group(owner.get("apiVersion")), owner.get("kind"))
        if key[0] is not None and kind_name(group, kind) in table.get(key, ()):  # type: ignore[arg-type]
            return key  # type: ignore[return-value]
        return None
    return None
