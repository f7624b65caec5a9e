"""What MutatingAdmissionPolicies did to an object, as findings (audit, pre-commit) and as additions (fix).

Why its own module: engine/mapeval.py answers the object the API server would store; the audit needs to say
which fields that changes, per policy, and `aiadmit fix` needs the changes as JSON Patch operations it can write
into the manifest, without the defaults the API server also fills in (those are the API server's, not the
policy's: writing them into a user's file would be noise).
"""

from __future__ import annotations

from typing import Any

from webhook.engine.mapeval import Outcome
from webhook.model import pointer as jp
from webhook.model.findings import Finding
from webhook.model.resource import Resource

MAX_LISTED = 12  # fields named in one finding; more are counted


def changes(before: Any, after: Any, path: str = "") -> list[dict]:
    """JSON Patch `add`/`remove` operations that turn `before` into `after`: a map's members one by one (an
    `add` onto a member replaces it), a list by its appended items when `after` extends `before`, else whole."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key, value in after.items():
            at = jp.join(path, key)
            if key not in before:
                out.append({"op": "add", "path": at, "value": value})
            elif before[key] != value:
                out += changes(before[key], value, at)
        out += [{"op": "remove", "path": jp.join(path, key)} for key in before if key not in after]
        return out
    if isinstance(before, list) and isinstance(after, list) and before != after:
        if len(after) == len(before):
            return [op for index, (old, new) in enumerate(zip(before, after)) if old != new
                    for op in changes(old, new, f"{path}/{index}")]
        if len(after) > len(before) and after[:len(before)] == before:
            return [{"op": "add", "path": f"{path}/-", "value": item} for item in after[len(before):]]
    if before == after:
        return []
    return [{"op": "add", "path": path, "value": after}] if path else []


def fields(operations: list[dict]) -> str:
    paths = list(dict.fromkeys(jp.to_dotted(op["path"].removesuffix("/-")) or "." for op in operations))
    listed = ", ".join(paths[:MAX_LISTED])
    return listed + (f" and {len(paths) - MAX_LISTED} more" if len(paths) > MAX_LISTED else "")


def findings(outcome: Outcome, steps: dict, resource: Resource) -> list[Finding]:
    """A finding per MAP binding that would change the object (audit, naming the fields), that fails the request
    (deny, the API server's message) or that cannot be decided offline (skip, with the reason). `steps` maps
    (policy, binding) to the operations it made."""
    out = []
    for policy, binding, message in outcome.denied:
        out.append(Finding(policy=policy, rule=f"{binding}/mutations", action="deny", result="fail",
                           message=message, resource=resource, pointer=""))
    for policy, binding, reason in outcome.skipped:
        out.append(Finding(policy=policy, rule=f"{binding}/mutations", action="audit", result="skip",
                           message=f"MutatingAdmissionPolicy '{policy}' with binding '{binding}' {reason}",
                           resource=resource, pointer=""))
    for (policy, binding), operations in steps.items():
        if not operations:
            continue
        out.append(Finding(policy=policy, rule=f"{binding}/mutations", action="audit", result="fail",
                           message=f"MutatingAdmissionPolicy '{policy}' with binding '{binding}' would change "
                                   f"{fields(operations)}", resource=resource, pointer=""))
    return out


def onto(raw: Any, operations: list[dict]) -> list[dict]:
    """The operations (made on the object as the API server defaults it) as additions to the manifest as written:
    an `add` whose parent the manifest lacks (the API server's default made it) adds the first missing step
    carrying the rest; a `remove` of what the manifest does not hold is dropped (it removed a default)."""
    out = []
    for operation in operations:
        tokens = jp.split(operation["path"])
        node, depth = jp.walk(raw, tokens[:-1])
        if operation["op"] == "remove":
            if depth == len(tokens) - 1 and isinstance(node, dict) and tokens[-1] in node:
                out.append(operation)
            continue
        if depth == len(tokens) - 1:
            if tokens[-1] == "-" and not isinstance(node, list):
                continue
            out.append(operation)
            continue
        value = operation["value"]
        rest = tokens[depth + 1:]
        if rest and rest[-1] == "-":
            value, rest = [value], rest[:-1]
        for token in reversed(rest):
            value = {token: value}
        out.append({"op": "add", "path": jp.join("", *tokens[:depth + 1]), "value": value})
    return out
