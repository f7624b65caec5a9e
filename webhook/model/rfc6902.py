"""JSON Patch (RFC 6902) applied as the API server applies a MutatingAdmissionPolicy's patch.

Why not the `jsonpatch` library: the API server uses gopkg.in/evanphx/json-patch.v4 (v4.13.0 in v1.37.2) with its
default options, and that differs from a strict RFC 6902 reading where the stored object depends on it (facts
read from that library's source, and checked on kube-apiserver v1.37.2 by tests/data/map):

- a negative array index counts from the end (`add` at `-1` of two items inserts at 2, that is appends; `remove`,
  `replace` and a path's steps at `-1` mean the last item);
- `replace` of a map member that is missing sets it (only a bad array index is "missing key"), and `add` at the
  root is "missing path";
- `test` of a missing member holds only when the operation has no `value` at all (`value: null` fails), a missing
  parent is an error, and a failed `test` is not an error for the policy: the whole patch is then not applied
  (`TestFailed`);
- the errors are worded as the library words them, which the API server puts after `JSON Patch: `.

The document is never changed in place: `apply` works on a deep copy and answers it.
"""

from __future__ import annotations

import copy
from typing import Any

_ABSENT = object()  # an operation without a `value` (the API server leaves it out when the JSONPatch has none)


class PatchError(ValueError):
    """A patch that does not apply to the document."""


class TestFailed(PatchError):
    """A `test` operation that does not hold: the API server leaves the object unpatched, without an error."""


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _atoi(key: str) -> int:
    text = key[1:] if key[:1] in "+-" else key
    if not text or not text.isascii() or not text.isdigit():
        raise PatchError(f'strconv.Atoi: parsing "{key}": invalid syntax')
    return int(key)


def _invalid(index: int) -> PatchError:
    return PatchError(f"Unable to access invalid index: {index}: invalid index referenced")


def _position(items: list, key: str, extra: int = 0) -> int:
    """An index of `items` (negative: from the end); `extra` 1 where one past the end is allowed (insertion)."""
    index = _atoi(key)
    size = len(items) + extra
    if index < 0:
        if index < -size:
            raise _invalid(index)
        index += size
    if index >= size:
        raise _invalid(index)
    return index


def _get(node: Any, key: str) -> Any:
    """A member (None when a map lacks it, as the library's map `get`), or an item (an error when out of range)."""
    if isinstance(node, dict):
        return node.get(key)
    return node[_position(node, key)]


def _find(document: Any, path: Any) -> tuple[Any, str]:
    """(the container of the path's last step, that step), or (None, "") where the library's findObject fails."""
    if not isinstance(path, str):
        return None, ""
    split = path.split("/")
    if len(split) < 2:
        return None, ""
    node = document
    for part in split[1:-1]:
        try:
            node = _get(node, unescape(part)) if isinstance(node, (dict, list)) else None
        except PatchError:
            return None, ""
        if not isinstance(node, (dict, list)):
            return None, ""
    return node, unescape(split[-1])


def _add(container: Any, key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    try:
        index = _atoi(key)
    except PatchError as exc:
        raise PatchError(f"value was not a proper array index: '{key}': {exc}") from None
    container.insert(_position(container, str(index), extra=1), value)


def _remove(container: Any, key: str) -> Any:
    if isinstance(container, dict):
        if key not in container:
            raise PatchError(f"Unable to remove nonexistent key: {key}: missing value")
        return container.pop(key)
    return container.pop(_position(container, key))


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


def _one(out: Any, operation: dict) -> Any:
    op, path = operation.get("op"), operation.get("path")
    value = operation.get("value", _ABSENT)
    written = None if value is _ABSENT else copy.deepcopy(value)
    if op == "add":
        container, key = _find(out, path)
        if container is None:
            raise PatchError(f'add operation does not apply: doc is missing path: "{path}": missing value')
        try:
            _add(container, key, written)
        except PatchError as exc:
            raise PatchError(f"error in add for path: '{path}': {exc}") from None
    elif op == "remove":
        container, key = _find(out, path)
        if container is None:
            raise PatchError(f'remove operation does not apply: doc is missing path: "{path}": missing value')
        try:
            _remove(container, key)
        except PatchError as exc:
            raise PatchError(f"error in remove for path: '{path}': {exc}") from None
    elif op == "replace":
        if path == "":
            if not isinstance(written, (dict, list)):
                raise PatchError("replace operation value must be object or array")
            return written
        container, key = _find(out, path)
        if container is None:
            raise PatchError(f"replace operation does not apply: doc is missing path: {path}: missing value")
        if isinstance(container, dict):
            container[key] = written
        else:
            try:
                container[_position(container, key)] = written
            except PatchError:
                raise PatchError(f"replace operation does not apply: doc is missing key: {path}: missing "
                                 f"value") from None
    elif op in ("move", "copy"):
        source = operation.get("from")
        container, key = _find(out, source)
        if container is None:
            raise PatchError(f"{op} operation does not apply: doc is missing from path: {source}: missing value")
        try:
            moved = _get(container, key)
            if op == "move":
                _remove(container, key)
        except PatchError as exc:
            raise PatchError(f"error in {op} for {'path' if op == 'move' else 'from'}: "
                             f"'{key if op == 'move' else source}': {exc}") from None
        target, last = _find(out, path)
        if target is None:
            raise PatchError(f"{op} operation does not apply: doc is missing destination path: {path}: missing "
                             f"value")
        try:
            _add(target, last, moved if op == "move" else copy.deepcopy(moved))
        except PatchError as exc:
            raise PatchError(f"error in move for path: '{path}': {exc}" if op == "move"
                             else f"error while adding value during copy: {exc}") from None
    elif op == "test":
        if path == "":
            if not _equal(out, written):
                raise TestFailed(f"testing value {path} failed: test failed")
            return out
        container, key = _find(out, path)
        if container is None:
            raise PatchError(f"test operation does not apply: is missing path: {path}: missing value")
        try:
            found = _get(container, key)
        except PatchError as exc:
            raise PatchError(f"error in test for path: '{path}': {exc}") from None
        if found is None:
            if value is _ABSENT:
                return out
            raise TestFailed(f"testing value {path} failed: test failed")
        if value is _ABSENT or not _equal(found, written):
            raise TestFailed(f"testing value {path} failed: test failed")
    else:
        raise PatchError(f"Unexpected kind: {op}")
    return out


def apply(document: Any, operations: list[dict]) -> Any:
    """The document after every operation, in order (a copy); PatchError or TestFailed when one does not apply."""
    out = copy.deepcopy(document)
    for operation in operations:
        out = _one(out, operation)
    return out
