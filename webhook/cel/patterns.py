"""Constants checked at load: a regex, a quantity, a duration, an IP, ... that a param (or a literal pattern) feeds.

Why: a pattern RE2 rejects (look-behind, back-references), a quantity written `4 Gi` or a duration `5x` would
otherwise fail at run time on every review, at the manifest's line instead of the author's. A param is a constant
once the config is loaded, so it is checked as the literal it becomes, wherever the expression reaches it:
`params.pattern`, `params.patterns[0]`, `params.byKind['Pod']` (any value of the map when the key is not a
constant), `'^' + params.registry + '/'`, a comprehension's variable over a param list or map
(`params.patterns.exists(p, ...)`, `params.m.all(k, v, ...)`: each element, key or value), a `cel.bind` of one,
and a policy's named variable whose expression is such a constant (`variables: [{name: pat, expression:
params.pattern}]`, then `matches(variables.pat)`: language/compiler.py passes each one's values, `named`).
Literals are checked only where Kubernetes' validators check them (ValidateRegexLiterals; duration, timestamp and
format literals in cel/strictness.py): `quantity("4 Gi")` compiles in Kubernetes, and so it loads here.
The checker (cel/checker.py) turns a problem into its CheckError with the param's path; a param's problem is
reported at the param's own value, once (language/compiler.py), in the policy or the config file that sets it.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from webhook.cel import strictness as strict
from webhook.cel.constants import DYN

Values = list  # of (value, the param's path (name, index or key, ...) or None for a literal's)
MAX_VALUES = 4096  # what one argument is checked for at most (a sum of lists, a product of concatenations)

# function -> (its argument, receiver first, that is a constant of its own syntax; the function that parses it)
TYPED = {"quantity": (0, "quantity"), "duration": (0, "duration"), "timestamp": (0, "timestamp"), "ip": (0, "ip"),
         "cidr": (0, "cidr"), "url": (0, "url"), "semver": (0, "semver"), "ip.isCanonical": (0, "ip"),
         "containsIP": (1, "ip"), "containsCIDR": (1, "cidr")}


class Built(tuple):
    """The path of a param a value was built from (`'^' + params.registry`): its problem is the expression's too, so
    it is reported there, naming the param."""

    __slots__ = ()


class Named(dict):
    """The policy's named variables that are constants (name -> their Values), bound to `variables`: reading
    `variables.NAME` gives that variable's values, with the paths of the params they came from."""

    __slots__ = ()


def bound_for(named: Optional[Mapping[str, Values]]) -> dict:
    """The checker's initial bindings (`Checker.bound`): `variables` when some named variable is a constant."""
    return {"variables": [(Named(named), None)]} if named else {}


def of_source(source: str, params: Mapping, named: Optional[Mapping[str, Values]]) -> Optional[Values]:
    """The constant values a (checked) named variable's expression takes, when some come from a param, else None."""
    if "params" not in source and not (named and "variables" in source):
        return None  # cannot read a param: no parse
    from webhook.cel.parser import parse

    found = values(parse(source), {}, params, bound_for(named))
    return found if found and any(path is not None for _, path in found) else None


def _step(path: Optional[tuple], key: Any) -> Optional[tuple]:
    return None if path is None else path + (key,)


def _items(value: Any, path: Optional[tuple], keys: Optional[Values]) -> Values:
    """The elements of a list or the values of a map that `keys` (None: any key) select."""
    if type(value) is Named:  # `variables.NAME`: the values of the constant ones among those named
        wanted = list(value) if keys is None else [k for k, _ in keys if type(k) is str and k in value]
        return [item for k in wanted for item in value[k]]
    if type(value) is list:
        wanted = range(len(value)) if keys is None else \
            [int(k) for k, _ in keys if isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(value)]
        return [(value[k], _step(path, k)) for k in wanted]
    if type(value) is dict:
        wanted = list(value) if keys is None else [k for k, _ in keys if type(k) is str and k in value]
        return [(value[k], _step(path, k)) for k in wanted]
    return []


def values(node: tuple, scope: Mapping, params: Mapping, bound: Mapping) -> Optional[Values]:
    """The constant values `node` can take (each with its param path), or None when it is not a constant."""
    kind = node[0]
    if kind == "lit":
        return [(node[1], None)]
    if kind == "ident":
        if node[1] in bound:
            return bound[node[1]]
        return [(dict(params), ())] if node[1] == "params" and "params" not in scope else None
    if kind in ("select", "index"):
        found = values(node[1], scope, params, bound)
        if found is None:
            return None
        keys = [(node[2], None)] if kind == "select" else values(node[2], scope, params, bound)
        out = [item for value, path in found for item in _items(value, path, keys)]
        return out if len(out) <= MAX_VALUES else None
    if kind == "binary" and node[1] == "+":
        left, right = values(node[2], scope, params, bound), values(node[3], scope, params, bound)
        if left is None or right is None or len(left) * len(right) > MAX_VALUES:
            return None
        return [(a + b, Built(pa if pa is not None else pb) if (pa or pb) is not None else None)
                for a, pa in left for b, pb in right if type(a) is str and type(b) is str]
    if kind == "cond":
        a, b = values(node[2], scope, params, bound), values(node[3], scope, params, bound)
        return None if a is None or b is None else a + b
    return None


def elements(collections: Optional[Values], two: bool) -> tuple[Optional[Values], Optional[Values]]:
    """What a comprehension's variables range over: (the first: list elements or map keys, or with two variables
    indexes or keys; the second's values), for collections that are constants; None where not known."""
    if collections is None:
        return None, None
    first, second = [], []
    for value, path in collections:
        if type(value) is list:
            first += [(index, None) for index in range(len(value))] if two else _items(value, path, None)
            second += _items(value, path, None)
        elif type(value) is dict:
            first += [(key, _step(path, key)) for key in value]
            second += _items(value, path, None)
    return first, second


def shown(path: tuple) -> str:
    return str(path[0]) + "".join(f"[{step!r}]" for step in path[1:])


def _said(path: tuple, message: str, argument: tuple) -> tuple[str, tuple, Optional[tuple]]:
    if isinstance(path, Built):
        return f"built from param {shown(path)}: {message}", argument, None
    return f"param {shown(path)}: {message}", argument, path


def binding(bound: dict, variables: Mapping[str, Any], check: Callable[[], Any]) -> Any:
    """`check()` with each variable bound to the constants it takes (None: not a constant), shadowing any outer
    variable of that name."""
    saved = {name: bound[name] for name in variables if name in bound}
    bound.update(variables)
    try:
        return check()
    finally:
        for name in variables:
            bound.pop(name, None)
        bound.update(saved)


def constant_problem(name: str, arguments: tuple, scope: Mapping, checker: Any,
                     functions: Mapping[str, Any]) -> Optional[tuple[str, tuple, Optional[tuple]]]:
    """(message, the argument node, the param's path or None) for the first constant of a call that cannot run,
    else None. `functions`: the library (cel/library.py), whose implementations parse the constants."""
    function = functions.get(name)
    if function is not None and function.pattern is not None and function.pattern < len(arguments):
        argument = arguments[function.pattern]
        for value, path in values(argument, scope, checker.param_values, checker.bound) or ():
            if type(value) is str and (path is not None or argument[0] == "lit"):
                try:
                    function.check_pattern(value)
                except Exception as exc:  # what RE2 rejects fails the load
                    return _said(path, str(exc), argument) if path is not None else (str(exc), argument, None)
    if name in TYPED and TYPED[name][0] < len(arguments):
        position, parser = TYPED[name]
        argument = arguments[position]
        extra = ()
        if name == "semver" and len(arguments) == 2:  # normalize: as written if constant, else the lenient reading
            normalize = values(arguments[1], scope, checker.param_values, checker.bound)
            extra = (normalize[0][0] if normalize and len(normalize) == 1 else True,)
        for value, path in values(argument, scope, checker.param_values, checker.bound) or ():
            if path is None:
                continue  # a literal: Kubernetes' validators decide (cel/strictness.py)
            try:
                functions[parser].call(value, *extra)
            except Exception as exc:  # noqa: BLE001 - the constant's run fails whatever the data
                return _said(path, f"invalid {name}() argument: {exc}", argument)
    if name == "format" and len(arguments) == 2:
        for value, path in values(arguments[0], scope, checker.param_values, checker.bound) or ():
            if path is None or type(value) is not str:
                continue
            found = _format_problem(value, arguments[1], scope, checker)
            if found is not None:
                return _said(path, f"format string: {found}", arguments[0])
    return None


def _format_problem(template: str, argument: tuple, scope: Mapping, checker: Any) -> Optional[str]:
    """What cel-go's format check says of a constant format string: with the argument types when the arguments are
    a list literal, else the clauses alone."""
    if argument[0] == "list":
        items = argument[1]
        found = strict.format_problem(template, [checker.check(item, scope) for item in items],
                                      lambda index: strict.unshowable(checker, items[index], scope))
        return found[1] if found else None
    found = strict.format_problem(template, [DYN] * template.count("%"), lambda index: None)
    return found[1] if found and not found[1].startswith("too many arguments") else None
