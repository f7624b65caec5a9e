"""JSON Patch (RFC 6902) applied as the API server applies a MutatingAdmissionPolicy's patch.

Why not the `jsonpatch` library: the API server uses gopkg.in/evanphx/json-patch.v4 with its default options, and
that differs from a strict RFC 6902 reading where an answer depends on it: a negative array index counts from the
end (`/spec/containers/-1`), `test` of a missing member against `null` passes, and a failed `test` is not an
error for the policy (the whole patch is then not applied: `TestFailed`). Every other failure is a `PatchError`
with the library's wording, which the API server puts after `JSON Patch: `.

The document is never changed in place: `apply` works on a deep copy and answers it.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """A patch that does not apply to the document."""


class TestFailed(PatchError):
    """A `test` operation that does not hold: the API server leaves the object unpatched, without an error."""


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _tokens(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"path must be a string, not {path!r}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} must start with /")
    return [unescape(token) for token in path[1:].split("/")]


def _index(key: str, size: int, op: str, insert: bool = False) -> int:
    try:
        index = int(key)
    except ValueError:
        raise PatchError(f"{op} operation: {key!r} is not an array index") from None
    if str(index) != key.lstrip("+") and key not in (str(index),):
        raise PatchError(f"{op} operation: {key!r} is not an array index")
    if index > size or (index == size and not insert):
        raise PatchError(f"Unable to access invalid index: {index}")
    if index < 0:
        if index < -size:
            raise PatchError(f"Unable to access invalid index: {index}")
        index += size
    return index


def _parent(document: Any, tokens: list[str], op: str, path: str) -> Any:
    """The container the last token is a member of; a PatchError when the path's other members are missing."""
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            try:
                node = node[_index(token, len(node), op)]
            except PatchError:
                node = None
        else:
            node = None
        if not isinstance(node, (dict, list)):
            raise PatchError(f'{op} operation does not apply: doc is missing path: "{path}": missing value')
    return node


def _get(document: Any, path: str, op: str) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return document
    parent = _parent(document, tokens, op, path)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise PatchError(f"{op} operation does not apply: doc is missing from path: {path!r}")
        return parent[key]
    return parent[_index(key, len(parent), op)]


def _add(document: Any, path: str, value: Any, op: str = "add") -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent = _parent(document, tokens, op, path)
    key = tokens[-1]
    if isinstance(parent, dict):
        parent[key] = value
    elif key == "-":
        parent.append(value)
    else:
        parent.insert(_index(key, len(parent), op, insert=True), value)
    return document


def _remove(document: Any, path: str, op: str = "remove") -> tuple[Any, Any]:
    tokens = _tokens(path)
    if not tokens:
        raise PatchError(f"{op} operation: the whole document cannot be removed")
    parent = _parent(document, tokens, op, path)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise PatchError(f"Unable to remove nonexistent key: {key}: missing value")
        return document, parent.pop(key)
    return document, parent.pop(_index(key, len(parent), op))


def _replace(document: Any, path: str, value: Any) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent = _parent(document, tokens, "replace", path)
    key = tokens[-1]
    if isinstance(parent, dict):
        if key not in parent:
            raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing value")
        parent[key] = value
    else:
        parent[_index(key, len(parent), "replace")] = value
    return document


def _test(document: Any, path: str, value: Any) -> None:
    try:
        found = _get(document, path, "test")
    except PatchError:
        if value is None:
            return  # evanphx v4: a missing member tests equal to null
        raise TestFailed(f"testing value {path} failed: test failed") from None
    if not _equal(found, value):
        raise TestFailed(f"testing value {path} failed: test failed")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def apply(document: Any, operations: list[dict]) -> Any:
    """The document after every operation, in order (a copy); PatchError or TestFailed when one does not apply."""
    out = copy.deepcopy(document)
    for operation in operations:
        op = operation.get("op")
        path = operation.get("path")
        if op == "add":
            out = _add(out, path, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            out, _ = _remove(out, path)
        elif op == "replace":
            out = _replace(out, path, copy.deepcopy(operation.get("value")))
        elif op == "move":
            source = operation.get("from")
            if isinstance(path, str) and isinstance(source, str) and (path + "/").startswith(source + "/") \
                    and path != source:
                raise PatchError(f"Unable to move {source!r} into its own child {path!r}")
            out, value = _remove(out, source, "move")
            out = _add(out, path, value, "move")
        elif op == "copy":
            out = _add(out, path, copy.deepcopy(_get(out, operation.get("from"), "copy")), "copy")
        elif op == "test":
            _test(out, path, operation.get("value"))
        else:
            raise PatchError(f"Unexpected kind: {op}")
    return out
