"""cel-go's lists extension as Kubernetes 1.34 enables it (ext.Lists(ListsVersion(3))): the functions, natively.

Why: since 1.34 a ValidatingAdmissionPolicy may write `lists.range(n)`, `l.distinct()`, `l.flatten()`, `l.reverse()`,
`l.slice(i, j)`, `l.sort()`, and a policy ported from one must load here. Semantics and messages are cel-go's
(ext/lists.go): `flatten()` is one level, `sort()` wants comparable elements all of one type, `distinct()` keeps the
first of the elements CEL calls equal (1, 1u and 1.0 are one). The `sortBy` macro is not here (it needs the parser).
Bounded: `distinct` hashes a canonical key of each element (cel-go compares every pair), so every function is
linear (sort: n log n) in its input; `lists.range` is capped at a million items.
"""

from __future__ import annotations

from typing import Any

from webhook.cel import strings as st
from webhook.cel.values import UInt
from webhook.cel.runtime import MAX_SIZE, EvalError, expecting, less
from webhook.cel.values import NONE, Optional

_COMPARABLE = (int, UInt, float, bool, str, bytes)
# lists.range() builds its list: a million Python ints is about 36 MB, inside the webhook's memory limit with room
# (runtime.MAX_SIZE, 8 M, is a bound for characters; 8 M list items would be some 300 MB). cel-go v0.29 (Kubernetes
# 1.37) has the same bound, and refuses a negative size, with these words.
MAX_RANGE = 1_000_000


_list = expecting(list)


_int = expecting(int)


def range_(n: Any) -> list:
    n = _int(n, "lists.range")
    if n < 0:
        raise EvalError(f"lists.range: size must be non-negative, got {n}")
    if n > MAX_RANGE:
        raise EvalError(f"lists.range: size {n} exceeds maximum allowed ({MAX_RANGE})")
    return list(range(n))


def first(items: Any) -> Optional:
    """`l.first()` (cel-go's optional library, version 2): optional.of the first item, optional.none() of []."""
    items = _list(items, "first")
    return Optional(items[0]) if items else NONE


def last(items: Any) -> Optional:
    items = _list(items, "last")
    return Optional(items[-1]) if items else NONE


def reverse(value: Any) -> Any:
    """`reverse()` of a list (the lists extension) or of a string (the strings extension)."""
    if type(value) is str:
        return st.reverse(value)
    return _list(value, "reverse")[::-1]


def slice_(items: Any, start: Any, end: Any) -> list:
    items, start, end = _list(items, "slice"), _int(start, "slice"), _int(end, "slice")
    if start < 0 or end < 0:
        raise EvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise EvalError(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if len(items) < end:
        raise EvalError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return items[start:end]


def flatten(items: Any, depth: Any = 1) -> list:
    """Lists inside `items` spliced in, `depth` levels deep; iterative, so no nesting overflows the stack."""
    items, depth = _list(items, "flatten"), _int(depth, "flatten")
    if depth < 0:
        raise EvalError("level must be non-negative")
    out: list = []
    stack = [(iter(items), depth)]
    while stack:
        current, level = stack[-1]
        for item in current:
            if type(item) is list and level > 0:
                stack.append((iter(item), level - 1))
                break
            out.append(item)
        else:
            stack.pop()
    if len(out) > MAX_SIZE:
        raise EvalError(f"flatten() result larger than {MAX_SIZE} items")
    return out


def _order(items: list) -> Any:
    """The sort key of `items` (one orderable type, as cel-go's lists extension requires), None for the values."""
    kind = type(items[0])
    if kind not in _COMPARABLE and not _is_time(items[0]):
        raise EvalError("list elements must be comparable")
    if any(type(item) is not kind for item in items):
        raise EvalError("list elements must have the same type")
    return None if kind in _COMPARABLE else (lambda item: item.ns)


def sort(items: Any) -> list:
    items = _list(items, "sort")
    return sorted(items, key=_order(items)) if items else items


def sort_by(items: Any, keys: Any) -> list:
    """cel-go's `@sortByAssociatedKeys`, what `list.sortBy(e, key)` calls: the items in the order of their keys (one
    orderable type). Python's sort is stable; cel-go's (Go's sort.Slice) is too up to 12 items, so among more, items
    of equal keys may come out in another order there."""
    items, keys = _list(items, "sortBy"), _list(keys, "sortBy")
    if len(items) != len(keys):
        raise EvalError(f"@sortByAssociatedKeys() expected a list of the same size as the associated keys list, but "
                        f"got {len(items)} and {len(keys)} elements respectively")
    if not items:
        return items
    key = _order(keys) or (lambda value: value)
    return [items[i] for i in sorted(range(len(items)), key=lambda i: key(keys[i]))]


def _is_time(value: Any) -> bool:
    try:
        less(value, value, "<")
    except EvalError:
        return False
    return True


def _key(value: Any) -> Any:
    """A hashable key under which the values CEL calls equal coincide (numbers across int, uint and double)."""
    kind = type(value)
    if kind is bool:
        return ("b", value)
    if kind in (int, UInt, float):
        return ("n", value)  # Python: hash(1) == hash(1.0) and 1 == 1.0, as CEL's equality
    if kind is list:
        return ("l", tuple(_key(item) for item in value))
    if kind is dict:
        return ("m", frozenset((_key(k), _key(v)) for k, v in value.items()))
    return (kind.__name__, value)


def distinct(items: Any) -> list:
    items = _list(items, "distinct")
    seen, out = set(), []
    for item in items:
        if type(item) is float and item != item:  # NaN equals nothing, itself included
            out.append(item)
            continue
        try:
            key = _key(item)
        except RecursionError:
            raise EvalError("distinct() of lists nested too deeply") from None
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out
