"""JSON Patch (RFC 6902) `add` operations: built where a mutation's value is absent, and applied.

The engine's mutations only ever add what is missing, so `add` is the one
operation built and applied here; the engine (working copy), the fixer (a
ruamel round-trip tree, through `convert`) and nothing else apply them. The
webhook checks the finished patch with the `jsonpatch` library before it sends
it (app/admission.py), so that check does not depend on this code.
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional

from webhook.model import pointer as jp


class PatchError(ValueError):
    """An operation that does not apply to the document, with the reason."""


def default_op(document: dict, path: str, value: Any) -> Optional[dict]:
    """`add` of the first missing step of `path`, carrying the rest as nested maps; None if present.

    Lists on the way must hold the item the path names (a container, a Ray worker
    group); a list or scalar where a map belongs is not ours to rewrite: None.
    """
    tokens = jp.split(path)
    node: Any = document
    for position, token in enumerate(tokens):
        if isinstance(node, list):
            if not (token.isdigit() and int(token) < len(node)):
                return None
            node = node[int(token)]
            continue
        if not isinstance(node, dict):
            return None
        if node.get(token) is None:
            nested = value
            for inner in reversed(tokens[position + 1:]):
                nested = {inner: nested}
            return {"op": "add", "path": jp.join("", *tokens[:position + 1]), "value": nested}
        node = node[token]
    return None


def append_op(document: dict, path: str, value: Any) -> Optional[dict]:
    """`add` of `value` at the end of the list at `path` (the list itself when absent); None if not a list."""
    current = jp.resolve(document, path)
    if current is None:
        parent = jp.resolve(document, jp.join("", *jp.split(path)[:-1]))
        if not isinstance(parent, dict):
            return None
        return {"op": "add", "path": path, "value": [value]}
    if not isinstance(current, list):
        return None
    return {"op": "add", "path": path + "/-", "value": value}


def apply(document: Any, operation: dict, convert: Callable[[Any], Any] = copy.deepcopy) -> None:
    """Apply one `add` to `document` in place; `convert` makes the value the document will own.

    Raises PatchError when the operation is not an `add` or its parent does not exist.
    """
    if not isinstance(operation, dict) or operation.get("op") != "add" or "value" not in operation \
            or not isinstance(operation.get("path"), str) or not operation["path"].startswith("/"):
        raise PatchError(f"only well-formed 'add' operations are applied, got {operation!r:.120}")
    tokens = jp.split(operation["path"])
    parent = document
    for token in tokens[:-1]:
        if isinstance(parent, dict) and token in parent:
            parent = parent[token]
        elif isinstance(parent, list) and token.isdigit() and int(token) < len(parent):
            parent = parent[int(token)]
        else:
            raise PatchError(f"{operation['path']}: parent does not exist")
    last, value = tokens[-1], convert(operation["value"])
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"{operation['path']}: index out of range")
    else:
        raise PatchError(f"{operation['path']}: parent is neither object nor array")
