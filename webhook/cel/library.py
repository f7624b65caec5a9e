"""The functions a rule may call: each with its origin, its arities and argument kinds, and its implementation.

Why one table: the checker (cel/checker.py) rejects an unknown function or a
wrong arity at load from it, the compiler calls the implementation, and
docs/policy-language.md lists it with its origin, so the three never disagree.
Origins: `cel` (the CEL standard and cel-go's extensions Kubernetes enables:
strings, lists, sets, math, optional, bind), `kubernetes` (the Kubernetes CEL
libraries: quantity, lists, regex), `aiadmit` (aiadmit's own extension library,
not portable to a ValidatingAdmissionPolicy). CEL turns `x.f(a)` into `f(x, a)`,
so a method and a global function share an implementation; `member` says which
call forms are allowed. Regular expressions are RE2 (google-re2): linear time,
Kubernetes' syntax (`\\z` accepted, look-behind rejected).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from webhook.cel import k8slibs, lists as cel_lists, quantities as kq
from webhook.cel import strings as st
from webhook.cel.regex import find as _find, find_all as _find_all, matches, regex
from webhook.cel import timestamps as ts
from webhook.cel.values import INT64_MAX, INT64_MIN, UInt
from webhook.cel.runtime import EvalError, equals, expecting, less, overload, Optional as Opt, NONE, MAX_SIZE
from webhook.k8s.quotascope import quota_selects
from webhook.model import globs
from webhook.model.quantity import QuantityError, format_bytes, parse_quantity
from webhook.model.valueclass import Frozen


class Function(Frozen):
    """One function: `args` are the kinds of its arguments, receiver first (`any`, `string`, `int`, `number`,
    `list`, `map`, `quantity`, `bool`, `optional`), one tuple per accepted arity; `result` its type (or None: dyn)."""

    def __init__(self, name: str, origin: str, args: tuple[tuple[str, ...], ...], result: Optional[Any],
                 call: Callable[..., Any], member: Optional[bool] = None, doc: str = "", pattern: Optional[int] = None,
                 check: Optional[Callable[[list, bool], Optional[str]]] = None) -> None:
        """`origin`: cel | kubernetes | aiadmit; `member` True: only x.f(...), False: only f(...), None: both;
        `pattern`: the argument (receiver first) that is a regular expression, checked at load; `check`:
        (kinds, a method call?) -> why not, or None."""
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "result", result)
        object.__setattr__(self, "call", call)
        object.__setattr__(self, "member", member)
        object.__setattr__(self, "doc", doc)
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "check", check)

    @staticmethod
    def check_pattern(pattern: str) -> None:
        regex(pattern)


_QUANTITIES: dict[str, float] = {}  # "48Gi" -> 51539607552.0: pods repeat a few dozen sizes
QUANTITIES = _QUANTITIES  # read by compiled code too (cel/fastpaths.py): only quantity() below writes it


def quantity(value: Any) -> float:
    """Kubernetes' quantity(): the value in base units, carried as a double, or as a kq.Quantity where the double
    does not tell all Kubernetes would answer (cel/quantities.py)."""
    if type(value) is str:
        found = _QUANTITIES.get(value)
        if found is not None:
            return found
        try:
            parsed = kq.carry(kq.parse(value))
        except kq.QuantityError as exc:
            raise EvalError(f"{value[:40]!r} is not a Kubernetes quantity: {exc}") from None
        if len(_QUANTITIES) < 4096:
            _QUANTITIES[value] = parsed
        return parsed
    if type(value) not in (int, float):
        raise overload("quantity", value)
    try:  # aiadmit's quantity of a number: by value, as the API server would have stored it (`1.0` as "1")
        parse_quantity(value)
    except QuantityError as exc:
        raise EvalError(str(exc)) from None
    return kq.carry((False, int(value), 0) if float(value).is_integer() else kq.parse(repr(value)))


def _is_quantity(value: Any) -> bool:
    if type(value) is not str:
        raise overload("isQuantity", value)
    try:
        kq.parse(value)
    except kq.QuantityError:
        return False
    return True


def _q(value: Any, name: str) -> float:
    if type(value) is float or type(value) is kq.Quantity:
        return value
    if type(value) is int:  # `add(1)`: Kubernetes' int overloads
        return float(value)
    raise overload(name, value)


def _compare(a: Any, b: Any) -> int:
    if type(a) is not float or type(b) is not float:  # the common case first: both quantities (doubles)
        a, b = _q(a, "compareTo"), _q(b, "compareTo")
        if type(a) is kq.Quantity or type(b) is kq.Quantity:  # exactly, beyond a double's precision
            a, b = kq.exact(a), kq.exact(b)
    return (a > b) - (a < b)


def _operand(value: Any, name: str) -> Any:
    return value if type(value) is int else _q(value, name)


def _sign(q: Any) -> int:
    if type(q) is not float:
        q = _q(q, "sign")
    return (q > 0.0) - (q < 0.0)


def _is_integer(q: Any) -> bool:
    if type(q) is not float:
        q = _q(q, "isInteger")
        if type(q) is kq.Quantity:
            return q.integer is not None
    return q.is_integer() and -9.223372036854775808e18 <= q < 9.223372036854775808e18


def _as_integer(value: Any) -> int:
    value = _q(value, "asInteger")
    if type(value) is kq.Quantity and value.integer is not None:  # Kubernetes' int64 form
        return value.integer
    if type(value) is kq.Quantity or not value.is_integer() or not (INT64_MIN <= value <= INT64_MAX):
        raise EvalError("cannot convert value to integer: the quantity is not an int64")  # as Kubernetes
    return int(value)


_list = expecting(list)


def _sum(items: Any) -> Any:
    items = _list(items, "sum")
    if not items:
        return 0  # Kubernetes: an empty list sums to int 0
    kind = type(items[0])
    if kind is ts.Duration:  # Kubernetes sums durations too
        return k8slibs.sum_durations(items)
    if kind not in (int, float, UInt):
        raise overload("sum", items)
    total = items[0]
    for item in items[1:]:
        if type(item) is not kind:
            raise overload("sum", items)
        total += item
    if kind is int and not (INT64_MIN <= total <= INT64_MAX):
        raise EvalError("integer overflow")
    return UInt(total) if kind is UInt else total


def _extreme(items: Any, name: str, pick: str) -> Any:
    items = _list(items, name)
    if not items:
        raise EvalError(f"{name} called on empty list")  # Kubernetes' wording
    best = items[0]
    for item in items[1:]:
        if less(item, best, pick):
            best = item
    return best


def _is_sorted(items: Any) -> bool:
    items = _list(items, "isSorted")
    return all(not less(b, a, "<") for a, b in zip(items, items[1:]))


def _index_of(target: Any, item: Any, start: Any = None) -> int:
    if type(target) is str:
        return st.index_of(target, item, start)
    items = _list(target, "indexOf")
    for position, candidate in enumerate(items):
        if equals(candidate, item):
            return position
    return -1


def _last_index_of(target: Any, item: Any, start: Any = None) -> int:
    if type(target) is str:
        return st.last_index_of(target, item, start)
    items = _list(target, "lastIndexOf")
    for position in range(len(items) - 1, -1, -1):
        if equals(items[position], item):
            return position
    return -1


def _includes(target: Any, item: Any) -> bool:
    """Kubernetes 1.37's `<dyn>.includes(<dyn>)` (lists library v1): an element of a list equals `item`, or, for
    any other target (a map, a string), the target itself does; never an error."""
    if type(target) is list:
        return any(equals(candidate, item) for candidate in target)
    return equals(target, item)


def _greatest_least(name: str, pick: str) -> Callable[..., Any]:
    def call(*values: Any) -> Any:
        if len(values) == 1 and type(values[0]) is list:
            values = tuple(values[0])
        if not values or any(type(v) not in (int, float, UInt) for v in values):
            raise overload(name, *values)
        return _extreme(list(values), name, pick)
    return call


def _set(name: str, test: Callable[[list, list], bool]) -> Callable[[Any, Any], bool]:
    def call(a: Any, b: Any) -> bool:
        return test(_list(a, name), _list(b, name))
    return call


def _has_all(a: list, b: list) -> bool:
    return all(any(equals(x, y) for y in a) for x in b)


def _glob(value: Any, patterns: Any) -> bool:
    if isinstance(patterns, str):
        patterns = [patterns]
    if type(value) is not str or type(patterns) is not list:
        raise overload("glob", value, patterns)
    return globs.any_matches(value, patterns)  # fnmatch.fnmatchcase's answers (model/globs.py)


def _join(items: Any, sep: Any = "") -> str:
    items = _list(items, "join")
    if type(sep) is not str:  # aiadmit's join() formats numbers too (messages join quantities); Kubernetes' not
        raise overload("join", items, sep)
    out = sep.join(item if type(item) is str else _display(item) for item in items)
    if len(out) > MAX_SIZE:
        raise EvalError(f"join() result larger than {MAX_SIZE} characters")
    return out


def _display(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _opt_value(value: Any) -> Any:
    if type(value) is not Opt:
        raise overload("value", value)
    if value is NONE:
        raise EvalError("optional.none() has no value")
    return value.value


def _has_value(value: Any) -> bool:
    if type(value) is not Opt:
        raise overload("hasValue", value)
    return value is not NONE


def _or_value(value: Any, default: Any) -> Any:
    if type(value) is not Opt:
        raise overload("orValue", value)
    return default if value is NONE else value.value


def _or(value: Any, other: Any) -> Any:
    if type(value) is not Opt or type(other) is not Opt:
        raise overload("or", value, other)
    return other if value is NONE else value


def _of_non_zero(value: Any) -> Any:
    zero = value is None or value is False or (type(value) in (int, float, UInt, str, bytes, list, dict) and not value)
    return NONE if zero else Opt(value)


def _maxof(a: Any, b: Any) -> Any:
    return a if not less(a, b, "<") else b


def _minof(a: Any, b: Any) -> Any:
    return a if not less(b, a, "<") else b


def _f(name, origin, args, result, call, member=None, doc="", pattern=None):
    return Function(name, origin, args, result, call, member, doc, pattern)


_A = "any"
FUNCTIONS: dict[str, Function] = {f.name: f for f in (
    # Kubernetes: quantity library
    _f("quantity", "kubernetes", (("any",),), "quantity", quantity, False,
       "of a string (Kubernetes); of a number (YAML's `cpu: 2`, kept by custom resources) is the aiadmit "
       "quantity-of-number extension"),
    _f("isQuantity", "kubernetes", (("string",),), "bool", _is_quantity, False),
    _f("isGreaterThan", "kubernetes", (("quantity", "quantity"), (k8slibs.SEMVER,) * 2), "bool",
       k8slibs.overloaded("isGreaterThan", lambda a, b: _compare(a, b) > 0, lambda c: c > 0), True),
    _f("isLessThan", "kubernetes", (("quantity", "quantity"), (k8slibs.SEMVER,) * 2), "bool",
       k8slibs.overloaded("isLessThan", lambda a, b: _compare(a, b) < 0, lambda c: c < 0), True),
    _f("compareTo", "kubernetes", (("quantity", "quantity"), (k8slibs.SEMVER,) * 2), "int",
       k8slibs.overloaded("compareTo", _compare, lambda c: c), True),
    _f("asApproximateFloat", "kubernetes", (("quantity",),), "double", lambda q: float(_q(q, "asApproximateFloat")),
       True),
    _f("asInteger", "kubernetes", (("quantity",),), "int", _as_integer, True),
    _f("isInteger", "kubernetes", (("quantity",),), "bool", _is_integer, True),
    # Kubernetes' `sign` is a global function only, sign(q) (k8s.io/apiserver cel/library/quantity.go): its
    # compiler has no `q.sign()`, so neither has aiadmit's
    _f("sign", "kubernetes", (("quantity",),), "int", _sign, False, "a function, `sign(q)`, as in Kubernetes"),
    _f("add", "kubernetes", (("quantity", "quantity"), ("quantity", "int")), "quantity",
       lambda a, b: kq.add(_q(a, "add"), _operand(b, "add")), True),
    _f("sub", "kubernetes", (("quantity", "quantity"), ("quantity", "int")), "quantity",
       lambda a, b: kq.add(_q(a, "sub"), _operand(b, "sub"), negate=True), True),
    # Kubernetes: lists library
    _f("sum", "kubernetes", (("list",),), None, _sum, None,
       "as a method (Kubernetes); `sum(list)` is the aiadmit spelling"),
    _f("min", "kubernetes", (("list",),), None, lambda items: _extreme(items, "min", "<"), True),
    _f("max", "kubernetes", (("list",),), None, lambda items: _extreme(items, "max", ">"), True),
    _f("isSorted", "kubernetes", (("list",),), "bool", _is_sorted, True),
    _f("indexOf", "kubernetes", ((_A, _A), ("string", "string", "int")), "int", _index_of, True,
       "lists (Kubernetes) and strings (cel-go strings extension)"),
    _f("lastIndexOf", "kubernetes", ((_A, _A), ("string", "string", "int")), "int", _last_index_of, True),
    _f("includes", "kubernetes", ((_A, _A),), "bool", _includes, True,
       "Kubernetes 1.37 (lists library v1); a new expression from 1.38 (policy `kubernetesVersion`)"),
    # Kubernetes: regex library (and CEL's matches), RE2
    _f("matches", "cel", (("string", "string"),), "bool", matches, pattern=1),
    _f("find", "kubernetes", (("string", "string"),), "string", _find, True, pattern=1),
    _f("findAll", "kubernetes", (("string", "string"), ("string", "string", "int")), ("list", "string"),
       _find_all, True, pattern=1),
    # cel-go strings extension (Kubernetes enables it)
    _f("charAt", "cel", (("string", "int"),), "string", st.char_at, True),
    _f("replace", "cel", (("string", "string", "string"), ("string", "string", "string", "int")), "string",
       st.replace, True),
    _f("split", "cel", (("string", "string"), ("string", "string", "int")), ("list", "string"), st.split, True),
    _f("substring", "cel", (("string", "int"), ("string", "int", "int")), "string", st.substring, True),
    _f("trim", "cel", (("string",),), "string", st.trim, True),
    _f("upperAscii", "cel", (("string",),), "string", st.upper_ascii, True),
    _f("lowerAscii", "cel", (("string",),), "string", st.lower_ascii, None,
       "as a method (cel-go); `lowerAscii(s)` is the aiadmit spelling"),
    _f("reverse", "cel", (("string",), ("list",)), None, cel_lists.reverse, True, "strings and lists extensions"),
    _f("join", "cel", (("list",), ("list", "string")), "string", _join, None,
       "as a method (cel-go); `join(list, sep)` and joining non-strings are aiadmit's"),
    _f("strings.quote", "cel", (("string",),), "string", st.quote, False),
    _f("format", "cel", (("string", "list"),), "string", st.format_, True),
    # cel-go sets and math extensions
    _f("sets.contains", "cel", (("list", "list"),), "bool", _set("sets.contains", _has_all), False),
    _f("sets.equivalent", "cel", (("list", "list"),), "bool",
       _set("sets.equivalent", lambda a, b: _has_all(a, b) and _has_all(b, a)), False),
    _f("sets.intersects", "cel", (("list", "list"),), "bool",
       _set("sets.intersects", lambda a, b: any(any(equals(x, y) for y in b) for x in a)), False),
    _f("math.greatest", "cel", tuple((_A,) * n for n in range(1, 9)), None, _greatest_least("math.greatest", ">"),
       False),
    _f("math.least", "cel", tuple((_A,) * n for n in range(1, 9)), None, _greatest_least("math.least", "<"), False),
    _f("math.abs", "cel", (("number",),), None, st.math_abs, False),
    _f("math.sign", "cel", (("number",),), None, st.math_sign, False),
    _f("math.ceil", "cel", (("double",),), "double", st.math_round("ceil"), False),
    _f("math.floor", "cel", (("double",),), "double", st.math_round("floor"), False),
    _f("math.round", "cel", (("double",),), "double", st.math_round("round"), False),
    _f("math.trunc", "cel", (("double",),), "double", st.math_round("trunc"), False),
    _f("math.isNaN", "cel", (("double",),), "bool", lambda x: st.need_double(x, "isNaN") != x, False),
    _f("math.isInf", "cel", (("double",),), "bool", lambda x: abs(st.need_double(x, "isInf")) == float("inf"),
       False),
    _f("math.isFinite", "cel", (("double",),), "bool",
       lambda x: abs(st.need_double(x, "isFinite")) != float("inf") and x == x, False),
    *(_f(name, "cel", ((_A, _A),) if name not in ("math.bitNot",) else ((_A,),), None, call, False)
      for name, call in st.BITS.items()),
    _f("math.sqrt", "cel", (("number",),), "double", st.math_sqrt, False),
    # CEL standard: timestamps and durations (natively, cel/timestamps.py)
    _f("timestamp", "cel", ((_A,),), None, ts.timestamp, False),
    _f("duration", "cel", (("string",),), None, ts.duration, False),
    *(_f(name, "cel", ((_A,), (_A, "string")), "int", call, True) for name, call in ts.GETTERS.items()),
    # cel-go optional types
    _f("optional.of", "cel", ((_A,),), "optional", Opt, False),
    _f("optional.none", "cel", ((),), "optional", lambda: NONE, False),
    _f("optional.ofNonZeroValue", "cel", ((_A,),), "optional", _of_non_zero, False),
    _f("hasValue", "cel", (("optional",),), "bool", _has_value, True),
    _f("value", "cel", (("optional",),), None, _opt_value, True),
    _f("orValue", "cel", (("optional", _A),), None, _or_value, True),
    _f("or", "cel", (("optional", "optional"),), "optional", _or, True),
    # Kubernetes: ip, cidr, url, format, semver, jsonpatch (cel/k8slibs.py)
    *(_f(*spec) for spec in k8slibs.SPECS),
    # aiadmit's extension library: not portable to a ValidatingAdmissionPolicy
    _f("formatBytes", "aiadmit", (("number",),), "string", lambda n: format_bytes(int(n)), False),
    _f("glob", "aiadmit", (("string", _A),), "bool", _glob, False),
    _f("maxOf", "aiadmit", ((_A, _A),), None, _maxof, False),
    _f("minOf", "aiadmit", ((_A, _A),), None, _minof, False),
    _f("least", "aiadmit", (("list",), ("list", _A)), None,
       lambda items, default=None: _extreme(items, "least", "<") if _list(items, "least") else default, False),
    _f("greatest", "aiadmit", (("list",), ("list", _A)), None,
       lambda items, default=None: _extreme(items, "greatest", ">") if _list(items, "greatest") else default, False),
    _f("quotaSelects", "aiadmit", ((_A, _A), (_A, _A, _A)), "bool", quota_selects, False,
       "the API server's ResourceQuota scope matching"),
)}

FUNCTIONS.update({name: Function(**{**vars(FUNCTIONS[name]), "check": test}) for name, test in k8slibs.CHECKS.items()})

# What the reference library (the fallback) is given: plain callables by name (no namespaced names: it has its own)
CALLABLES: dict[str, Callable[..., Any]] = {name: f.call for name, f in FUNCTIONS.items() if "." not in name}
