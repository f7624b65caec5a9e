"""The static cost estimate at load, in the manner of Kubernetes' CEL cost model: a rule too costly does not load.

Why: three nested all() over 400 containers ran 32 s inside a 2 s review budget.
Like Kubernetes, sizes are bounded by the object's size limit (the API server
takes at most 3 MiB): a string read from the object has at most that many
characters, a list at most that many bytes over the smallest item (16 bytes:
`{"name":"x"},`). Each node costs 1, a string operation 0.1 per character it
reads (Kubernetes' figure), a comprehension its range's size times its body.
Two refinements keep honest rules cheap where a naive product would not:
- a range read from an enclosing comprehension's variable (`c.env` inside
  `containers.all(c, ...)`) is a part of that element, and all of them
  together are at most the object: its cost is counted once for the enclosing
  loop, not once per element (amortised);
- the same holds for the characters of strings read from that variable.
So `containers.all(c, c.env.all(e, ...))` is linear in the object, two
independent lists nested are quadratic, and three lists nested (or a string
doubled in a chain of binds) are far over the limit. What the estimate lets
through is stopped at run time by the step and size bounds (cel/runtime.py
MAX_STEPS, MAX_SIZE). The limits are configurable (Limits).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from webhook.cel.checker import CheckError
from webhook.cel.tree import children
from webhook.cel.limits import Limits  # noqa: F401 - re-exported: the limits this estimate is held to

_STRING_FUNCTIONS = frozenset({"matches", "find", "findAll", "contains", "startsWith", "endsWith", "split",
                               "replace", "indexOf", "lastIndexOf", "join", "lowerAscii", "upperAscii", "trim",
                               "substring", "format", "strings.quote", "glob", "reverse", "string",
                               # Kubernetes' ip, cidr, url, format, semver, jsonpatch: linear in their text
                               "ip", "isIP", "ip.isCanonical", "cidr", "isCIDR", "containsIP", "containsCIDR", "url",
                               "isURL", "getQuery", "getEscapedPath", "getHost", "getHostname", "validate", "semver",
                               "isSemver", "jsonpatch.escapeKey"})
# Results as large as their input (escapeKey: twice at most; a URL and what is read from it: the URL's text)
_SIZED_RESULTS = {"url": 1.0, "getQuery": 1.0, "getEscapedPath": 3.0, "getHost": 1.0, "getHostname": 1.0,
                  "validate": 1.0, "jsonpatch.escapeKey": 2.0}
# Kubernetes' factors over 0.1 a character (library/cost.go): isCanonical parses and compares; validate runs a
# pattern of up to 128 characters at 0.25 each
_FACTORS = {"ip.isCanonical": 2.0, "validate": 32.0}
_COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter"})


class _Est:
    """Cost by amortisation tag (None: paid every time; a variable's name: paid once for that variable's loop),
    the size bound (characters, bytes, or items), and the comprehension variable the value was read from."""

    __slots__ = ("cost", "size", "root")

    def __init__(self, cost: Optional[dict] = None, size: float = 1.0, root: Optional[str] = None):
        self.cost = cost or {None: 1.0}
        self.size = size
        self.root = root


def _merge(*costs: dict) -> dict:
    out: dict = {}
    for cost in costs:
        for tag, value in cost.items():
            out[tag] = out.get(tag, 0.0) + value
    return out


def _literal_size(value: Any) -> float:
    if isinstance(value, (str, bytes, list, dict)):
        return float(max(len(value), 1))
    return 1.0


def _reading(parts: list) -> dict:
    """0.1 per character read, each part's characters charged to the variable they were read from."""
    return _merge(*({part.root: 0.1 * part.size} for part in parts))


def _root(parts: list) -> Optional[str]:
    """Where a combined value was read from: the one variable all its large parts come from, else nowhere."""
    roots = {part.root for part in parts if part.size > 1024}
    return roots.pop() if len(roots) == 1 else None


class _Estimator:
    def __init__(self, positions: Mapping[int, int], params: Mapping[str, Any], limits: Limits):
        self.positions, self.params, self.limits = positions, params, limits
        self.data = float(limits.max_object_bytes)
        self.items = float(limits.max_object_bytes // limits.min_item_bytes)

    def walk(self, node: tuple, scope: Mapping[str, _Est]) -> _Est:
        kind = node[0]
        if kind == "lit":
            return _Est(size=_literal_size(node[1]))
        if kind == "ident":
            if node[1] in scope:
                bound = scope[node[1]]
                return _Est(size=bound.size, root=bound.root)
            return _Est(size=self.data)
        if kind in ("select", "optselect") and node[1] == ("ident", "params") and node[2] in self.params:
            return _Est(size=_literal_size(self.params[node[2]]))
        if kind == "call" and node[2] is not None and node[1] in _COMPREHENSIONS and node[3] and \
                node[3][0][0] == "ident":
            return self.comprehension(node, scope)
        if kind == "call" and node[1] == "cel.bind" and len(node[3]) == 3 and node[3][0][0] == "ident":
            init = self.walk(node[3][1], scope)
            body = self.walk(node[3][2], dict(scope, **{node[3][0][1]: init}))
            return _Est(_merge(init.cost, body.cost), body.size, body.root)
        parts = [self.walk(child, scope) for child in children(node)]
        cost = _merge({None: 1.0}, *(part.cost for part in parts))
        if kind in ("select", "index", "optselect", "optindex"):
            return _Est(cost, parts[0].size, parts[0].root)
        if kind == "binary" and node[1] == "+":
            size = parts[0].size + parts[1].size
            if size > self.data * self.limits.max_value_factor and node[2] == node[3]:  # `a + a`, doubling
                raise CheckError(f"the value built here is estimated at {size:.3g} characters or items, over "
                                 f"{self.limits.max_value_factor:g} times the largest object: a string or list "
                                 f"doubled again and again", self.positions.get(id(node), 0))
            return _Est(_merge(cost, _reading(parts)), size, _root(parts))
        if kind == "call" and node[1] in _STRING_FUNCTIONS:
            size = sum(part.size for part in parts)
            result = size if node[1] in ("join", "replace", "format", "lowerAscii", "upperAscii", "trim",
                                         "substring", "split", "findAll", "strings.quote", "reverse",
                                         "string") else _SIZED_RESULTS.get(node[1], 0.0) * size or 1.0
            reading = {tag: value * _FACTORS.get(node[1], 1.0) for tag, value in _reading(parts).items()}
            return _Est(_merge(cost, reading), result, _root(parts))
        if kind in ("list", "map", "struct"):
            return _Est(cost, sum(part.size for part in parts) or 1.0)
        if kind == "cond":
            return _Est(cost, max(parts[1].size, parts[2].size),
                        parts[1].root if parts[1].root == parts[2].root else None)
        if kind == "call" and node[1] in ("sort", "distinct", "reverse", "slice", "flatten", "lists.range"):
            # cel-go's lists extension: a pass over the list (sort: n log n, costed as 10 passes), a list as large
            size = parts[0].size if node[1] != "lists.range" else (
                float(node[3][0][1]) if node[3][0][0] == "lit" and type(node[3][0][1]) is int else self.items)
            factor = 10.0 if node[1] == "sort" else 1.0
            if node[1] == "lists.range":  # it builds its list from nothing: costed by memory, so that whatever
                factor = self.limits.per_expression / 4e6  # loads builds at most 4 million items (~150 MB)
            return _Est(_merge(cost, {parts[0].root if parts else None: size * factor}), size,
                        parts[0].root if parts and node[1] != "lists.range" else None)
        if kind == "call" and node[1] in ("sum", "min", "max", "isSorted", "indexOf", "lastIndexOf", "includes",
                                          "least", "greatest", "sets.contains", "sets.equivalent", "sets.intersects"):
            size = sum(part.size for part in parts)
            return _Est(_merge(cost, {parts[0].root if parts else None: size}), 1.0)
        return _Est(cost, 1.0)

    def comprehension(self, node: tuple, scope: Mapping[str, _Est]) -> _Est:
        _, name, target, args = node
        over = self.walk(target, scope)
        count = over.size if target[0] == "lit" or target[0] == "list" else min(over.size, self.items)
        two = len(args) == 3 and args[1][0] == "ident" and name != "map"
        variables = [args[0][1]] + ([args[1][1]] if two else [])
        inner = dict(scope, **{v: _Est(size=over.size, root=variables[0]) for v in variables})
        bodies = [self.walk(part, inner) for part in args[1 + two:]]
        body = _merge(*(b.cost for b in bodies)) if bodies else {None: 1.0}
        loop: dict = {}
        for tag, value in body.items():
            if tag == variables[0]:
                loop[None] = loop.get(None, 0.0) + value  # read from the element: at most the range, once
            else:
                loop[tag] = loop.get(tag, 0.0) + count * value
        loop[None] = loop.get(None, 0.0) + count
        if over.root is not None and over.root != variables[0]:  # a part of an enclosing element: amortised
            loop = {over.root: sum(loop.values())}
        last = bodies[-1] if bodies else _Est()
        size = 1.0
        if name == "map":
            size = over.size if last.root == variables[0] else count * last.size
        elif name == "filter":
            size = over.size
        return _Est(_merge(over.cost, loop), size, over.root if name in ("map", "filter") else None)


def estimate(tree: tuple, positions: Mapping[int, int], params: Mapping[str, Any],
             limits: Optional[Limits] = None) -> float:
    """The estimated worst-case cost of `tree`; CheckError when it is over `limits.per_expression`."""
    limits = limits or Limits()
    found = _Estimator(positions, params, limits).walk(tree, {})
    total = sum(found.cost.values())
    if total > limits.per_expression:
        raise CheckError(f"estimated cost {total:.3g} exceeds the limit {limits.per_expression:.3g} for an object "
                         f"of up to {limits.max_object_bytes} bytes (nested comprehensions over the same data, or "
                         f"a string built up in a loop): restructure the rule", positions.get(id(tree), 0))
    return total
