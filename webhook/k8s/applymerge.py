"""Server-side apply's merge of an apply configuration into an object, as a MutatingAdmissionPolicy's
ApplyConfiguration is merged by the API server (k8s.io/apiserver mutating/patch/smd.go on structured-merge-diff v6).

Why written here: the merge depends on the schema: a list of type `map` (containers by `name`, ports by
`containerPort` and `protocol`) merges item by item, a `set` by value, and an `atomic` list, map or struct may not
be written by a MAP at all (the API server refuses it: `may not mutate atomic arrays, maps or structs`). The
built-in kinds' schema is applyschema.json (written by applyschema_make.py from the v1.37.2 OpenAPI spec); a kind
it does not hold (a CRD) is read as structured-merge-diff reads an untyped object: maps merge, lists are atomic.
The order of a merged associative list is structured-merge-diff's: the live items in their order, an item the
configuration also names merged where the two orders meet, the configuration's new items after the live item they
follow in it.
"""

from __future__ import annotations

import copy
import json
import os
from functools import lru_cache
from typing import Any, Optional

_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "applyschema.json")
_UNTYPED = "__untyped__"  # a CRD's, or any kind the schema does not hold: maps granular, lists atomic


class MergeError(ValueError):
    """An apply configuration the API server refuses to merge, worded as it says it."""


@lru_cache(maxsize=1)
def _schema() -> dict:
    with open(_SCHEMA, encoding="utf-8") as handle:
        return json.load(handle)


def root_type(api_version: str, kind: str) -> str:
    return _schema()["kinds"].get(f"{api_version}/{kind}", _UNTYPED)


def _fields(shape: Any) -> Optional[dict]:
    """A struct shape's fields, or None when the shape is no struct of the schema."""
    if isinstance(shape, str) and shape != _UNTYPED:
        entry = _schema()["types"].get(shape)
        return entry["fields"] if entry is not None and entry["fields"] else None
    return None


def _child(shape: Any, key: str) -> Any:
    """The shape of a struct's field or a map's value."""
    if shape == _UNTYPED:
        return _UNTYPED
    if isinstance(shape, list) and shape[0] == "map":
        return shape[2]
    fields = _fields(shape)
    if fields is None:
        return 0
    return fields.get(key, _UNTYPED)  # a field the schema does not name: untyped, as preserved unknown fields


def _list_shape(shape: Any) -> tuple:
    """(list type, keys, item shape) of a list; an untyped one is atomic."""
    if isinstance(shape, list) and shape[0] == "list":
        return shape[1], shape[2], shape[3]
    return "atomic", [], _UNTYPED


def _atomic_struct(shape: Any) -> bool:
    if isinstance(shape, list) and shape[0] == "map":
        return shape[1] == "atomic"
    if isinstance(shape, str) and shape != _UNTYPED:
        entry = _schema()["types"].get(shape)
        return bool(entry and entry.get("atomic"))
    return False


def _key(item: Any, keys: list, kind: str) -> Any:
    if kind == "set":
        return json.dumps(item, sort_keys=True)
    if not isinstance(item, dict):
        raise MergeError("associative list with keys has an element that is not a map")
    for key in keys:
        if key not in item:
            raise MergeError(f'associative list with keys has an element that omits key field "{key}" '
                             f'(and doesn\'t have default value)')
    return tuple(json.dumps(item[key], sort_keys=True) for key in keys)


def _element(item: Any, keys: list, kind: str, index: int) -> str:
    """structured-merge-diff's PathElement text of a list item: `[name="c"]`, `[=value]`, `[0]`."""
    if kind == "map" and isinstance(item, dict):
        return "[" + ",".join(f"{key}={json.dumps(item.get(key))}" for key in keys) + "]"
    if kind == "set":
        return f"[={json.dumps(item)}]"
    return f"[{index}]"


def atomics(value: Any, shape: Any, path: str = "") -> list[str]:
    """The paths of the configuration that write an atomic list, map or struct (validatePatch in smd.go)."""
    found = []
    if isinstance(value, dict) and (isinstance(shape, list) and shape[0] == "map" or _fields(shape) is not None
                                    or shape == _UNTYPED):
        if _atomic_struct(shape):
            found.append(path)
        for key, item in value.items():
            if shape == _UNTYPED or _fields(shape) is None or key in (_fields(shape) or {}):
                found += atomics(item, _child(shape, key), f"{path}.{key}")
    elif isinstance(value, list) and (isinstance(shape, list) and shape[0] == "list" or shape == _UNTYPED):
        kind, keys, item_shape = _list_shape(shape)
        if kind == "atomic":
            found.append(path)
        for index, item in enumerate(value):
            found += atomics(item, item_shape, path + f"[{index}]")
    return found


def undeclared(value: Any, shape: Any, path: str = "") -> list[str]:
    """The fields of `value` the schema does not declare, as structured-merge-diff names them (`.spec.foo`);
    nothing under an untyped shape (a CRD's, or what a map holds)."""
    found = []
    fields = _fields(shape)
    if isinstance(value, dict) and fields is not None:
        for key, item in value.items():
            if key not in fields:
                found.append(f"{path}.{key}")
            else:
                found += undeclared(item, fields[key], f"{path}.{key}")
    elif isinstance(value, dict) and isinstance(shape, list) and shape[0] == "map":
        for key, item in value.items():
            found += undeclared(item, shape[2], f"{path}.{key}")
    elif isinstance(value, list) and isinstance(shape, list) and shape[0] == "list":
        for index, item in enumerate(value):
            found += undeclared(item, shape[3], f"{path}[{index}]")
    return found


def _merge(live: Any, config: Any, shape: Any) -> Any:
    if config is None:
        return None
    if isinstance(config, dict) and isinstance(live, dict):
        out = dict(live)
        for key, item in config.items():
            merged = _merge(live.get(key), item, _child(shape, key)) if key in live else copy.deepcopy(item)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        return out
    if isinstance(config, list) and isinstance(live, list):
        kind, keys, item_shape = _list_shape(shape)
        if kind in ("map", "set"):
            return _merge_list(live, config, kind, keys, item_shape)
    return copy.deepcopy(config)


def _merge_list(live: list, config: list, kind: str, keys: list, item_shape: Any) -> list:
    """structured-merge-diff's merge of two associative lists (typed/merge.go visitListItems), item by item."""
    left = [_key(item, keys, kind) for item in live]
    right = [_key(item, keys, kind) for item in config]
    if len(set(right)) != len(right):
        raise MergeError("duplicate entries for key in the apply configuration")
    by_left, by_right = {}, dict(zip(right, config))
    for key, item in zip(left, live):
        by_left[key] = None if key in by_left else item  # a duplicate live item is not merged
    shared = [key for key in right if key in by_left]
    next_shared = shared.pop(0) if shared else None
    out, merged = [], set()

    def merge(key):
        base = by_left.get(key)
        return _merge(base, by_right[key], item_shape) if base is not None else copy.deepcopy(by_right[key])

    li = ri = 0
    while li < len(left) or ri < len(right):
        if li < len(left) and ri < len(right):
            key = left[li]
            if key == right[ri]:
                merged.add(key)
                out.append(merge(key))
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if key in by_right and next_shared is not None and next_shared != key:
                li += 1
                continue
        if li < len(left):
            key = left[li]
            if key not in by_right:
                out.append(copy.deepcopy(live[li]))
                li += 1
                continue
            if key in merged:
                li += 1
        if ri < len(right):
            key = right[ri]
            merged.add(key)
            out.append(merge(key))
            ri += 1
            if next_shared is not None and next_shared == key:
                next_shared = shared.pop(0) if shared else None
    return [item for item in out if item is not None]


def apply(live: Any, configuration: dict, api_version: str, kind: str) -> Any:
    """`live` with `configuration` merged in (a copy); MergeError as the API server words a refusal."""
    shape = root_type(api_version, kind)
    config = dict(configuration)
    config.setdefault("apiVersion", api_version)
    config.setdefault("kind", kind)
    if config["apiVersion"] != api_version or config["kind"] != kind:
        raise MergeError(f"error applying patch: patch ({config['apiVersion']}, Kind={config['kind']}) and "
                         f"original object ({api_version}, Kind={kind}) are not of the same gvk")
    unknown = undeclared(config, shape)
    if unknown:
        raise MergeError(f"error applying patch: failed to convert patch object to typed object: {unknown[0]}: "
                         f"field not declared in schema")
    found = atomics(config, shape)
    if found:
        raise MergeError(f"error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or "
                         f"structs: {', '.join(found)}")
    try:
        return _merge(live, config, shape)
    except MergeError as exc:
        raise MergeError(f"error applying patch: failed to merge patch: {exc}") from None
