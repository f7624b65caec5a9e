"""Pod templates of a kind the kinds table does not list, found by their shape.

An operator's custom resource that is not in `kinds.yaml` (a new CRD, a fork, a kind
the table has not caught up with) still carries pods somewhere: wherever a
PodTemplateSpec or a PodSpec can stand (`spec.template`, `spec.tasks[*].template`,
`...replicaSpecs.*.template`, an inlined pod spec). Admitting such an object with
no check would be a silent pass, so the object is searched for maps that look like
a pod spec (a `containers` list of maps with an `image` or a `name`) and each one
found becomes a template, named by where it stands. The walk is bounded in depth
and in nodes; an object too large to search says so (`TooLarge`), it never passes
for empty.
"""

from __future__ import annotations

from typing import Any, Optional

from webhook.model import pointer as jp
from webhook.k8s.kindnames import holds_no_pods

MAX_DEPTH = 24
MAX_NODES = 50_000
class TooLarge(ValueError):
    """The object has more nodes than the search may visit."""


def _is_pod_spec(node: dict) -> bool:
    containers = node.get("containers")
    return (isinstance(containers, list) and bool(containers)
            and all(isinstance(c, dict) for c in containers)
            and any(isinstance(c.get("image"), str) or isinstance(c.get("name"), str) for c in containers))


def pod_specs(obj: dict) -> list[tuple[str, ...]]:
    """Tokens of every map in `obj` shaped like a pod spec, outermost first (a pod spec is not searched inside)."""
    found: list[tuple[str, ...]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((key,), value) for key, value in reversed(list(obj.items()))
                                                if key not in ("metadata", "status", "apiVersion", "kind")]
    visited = 0
    while stack:
        tokens, node = stack.pop()
        visited += 1
        if visited > MAX_NODES:
            raise TooLarge(f"more than {MAX_NODES} fields")
        if len(tokens) > MAX_DEPTH:
            continue
        if isinstance(node, dict):
            if _is_pod_spec(node):
                found.append(tokens)
                continue
            stack.extend((tokens + (str(key),), value) for key, value in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((tokens + (str(i),), value) for i, value in reversed(list(enumerate(node))))
    return found


def template_entries(obj: dict) -> list[dict]:
    """kinds.yaml-style template entries (concrete pointers, no wildcards) for every pod spec found in `obj`."""
    entries = []
    for tokens in pod_specs(obj):
        if len(tokens) >= 2 and tokens[-1] == "spec" and not tokens[-2].isdigit():
            at = tokens[:-1]  # a PodTemplateSpec: {metadata, spec}
            owner = at[:-1]
            entry = {"at": jp.tokens_join(at), "spec": "spec", "metadata": "metadata"}
        else:
            at = tokens  # a pod spec inlined where it stands
            owner = at[:-1] if at and at[-1] in ("template", "podSpec") else at
            entry = {"at": jp.tokens_join(at), "spec": "", "metadata": None}
        entry["replicas"] = "../replicas" if owner != at else "replicas"  # a sibling replica count, else 1
        entry["name"] = "template at " + (jp.to_dotted(jp.tokens_join(at)) or "the top")
        entries.append(entry)
    return entries


def searchable(group: str, kind: str) -> bool:
    """Whether an unlisted kind may hold pods at all (the table's `otherKinds` never do: CRDs, RBAC, data)."""
    return not holds_no_pods(group, kind)


def unlisted_name(group: str, kind: str) -> Optional[str]:
    return f"{kind} ({group})" if group else f"{kind} (core)"
