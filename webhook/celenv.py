"""The CEL environment rules are written in.

Expressions are compiled once at policy load (``common-expression-language``,
a Rust CEL with Python bindings; chosen by measurement, see bench/RESULTS.md).
The functions below are those of Kubernetes' own CEL library that the bundle
needs, so a rule reads the same here as in a ValidatingAdmissionPolicy:
``quantity("1Gi").isGreaterThan(quantity("512Mi"))``, ``compareTo``,
``asInteger``, ``asApproximateFloat``. A quantity is carried as its value in
base units (a double) so comparisons and arithmetic are native. CEL turns
``x.f(a)`` into ``f(x, a)``, which is how the method forms work.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any, Callable

import cel

from .quantity import QuantityError, format_bytes, parse_quantity
from .quotascope import quota_selects

_TEMPLATE = re.compile(r"\{\{(.+?)\}\}", re.S)


class CelError(ValueError):
    """An expression that does not compile."""


def _quantity(value: Any) -> float:
    try:
        return float(parse_quantity(value))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _is_quantity(value: Any) -> bool:
    try:
        parse_quantity(value)
    except QuantityError:
        return False
    return True


def _compare(a: float, b: float) -> int:
    return (a > b) - (a < b)


def _glob(value: str, patterns: Any) -> bool:
    if isinstance(patterns, str):
        patterns = [patterns]
    return any(fnmatch.fnmatchcase(value, p) for p in patterns)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    # Kubernetes CEL quantity library
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "isGreaterThan": lambda a, b: a > b,
    "isLessThan": lambda a, b: a < b,
    "compareTo": _compare,
    "asApproximateFloat": float,
    "asInteger": lambda q: int(q),
    "sign": lambda q: _compare(q, 0.0),
    # aiadmit helpers, for what Kubernetes CEL has no word for
    "formatBytes": lambda n: format_bytes(int(n)),
    "glob": _glob,
    "join": lambda items, sep="": sep.join(str(i) for i in items),
    "lowerAscii": lambda s: s.lower(),
    "maxOf": lambda a, b: a if a >= b else b,
    "minOf": lambda a, b: a if a <= b else b,
    "sum": lambda items: sum(items, 0.0),
    "least": lambda items, default=None: min(items) if items else default,
    "greatest": lambda items, default=None: max(items) if items else default,
    # Kubernetes quota scopes: does this ResourceQuota charge this pod (webhook/quotascope.py)
    "quotaSelects": quota_selects,
}


def new_context() -> cel.Context:
    context = cel.Context()
    for name, function in FUNCTIONS.items():
        context.add_function(name, function)
    return context


BOUND_OBJECTS = ("object", "pod", "podMeta", "container", "workload")
_ACCESS = {name: re.compile(r"\b" + name + r"\b(\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)(\s*\()?)?") for name in BOUND_OBJECTS}


def field_usage(source: str) -> dict[str, frozenset | None]:
    """Top-level fields of each bound object that an expression reads; None: the whole object.

    Converting a Python dict into CEL values is the dominant cost of an
    evaluation, so the engine binds only these fields. Any use it cannot see
    through (`pod[...]`, `pod` passed whole, a method call on it) asks for the
    whole object; a string literal that looks like an access only adds a field.
    """
    usage: dict[str, frozenset | None] = {}
    for name, pattern in _ACCESS.items():
        fields: set[str] | None = set()
        for match in pattern.finditer(source):
            if match.group(2) is None or match.group(3):
                fields = None
                break
            fields.add(match.group(2))
        if fields is None or fields:
            usage[name] = None if fields is None else frozenset(fields)
    return usage


def merge_usage(usages) -> dict[str, frozenset | None]:
    merged: dict[str, frozenset | None] = {}
    for usage in usages:
        for name, fields in usage.items():
            if fields is None or (name in merged and merged[name] is None):
                merged[name] = None
            else:
                merged[name] = (merged.get(name) or frozenset()) | fields
    return merged


_PARAM = re.compile(r"\bparams\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_STRING = re.compile(r"""[rR]?(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""", re.S)


def literal(value: Any) -> str:
    """A CEL literal for a parameter value (from YAML: scalars, lists, maps)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {literal(v)}" for k, v in value.items()) + "}"
    raise CelError(f"parameter value {value!r} has no CEL literal")


def inline_params(source: str, params: dict) -> str:
    """Replace `params.NAME` by the parameter's literal, outside string literals.

    Parameters are constants once the config is loaded, so they are folded into
    the program at compile time: nothing to bind per evaluation, and a typo in a
    parameter name fails the policy at load instead of at the first review.
    """
    out, position = [], 0
    for string in _STRING.finditer(source):
        out.append(_inline(source[position:string.start()], params))
        out.append(string.group(0))
        position = string.end()
    out.append(_inline(source[position:], params))
    return "".join(out)


def _inline(code: str, params: dict) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in params:
            raise CelError(f"unknown parameter {name!r} (known: {', '.join(sorted(params)) or 'none'})")
        return "(" + literal(params[name]) + ")"
    return _PARAM.sub(replace, code)


class Expression:
    """A compiled CEL program, the variables it reads and which of their fields (known statically)."""

    __slots__ = ("source", "program", "variables", "fields")

    def __init__(self, source: str, params: dict | None = None):
        self.source = source
        if params is not None:
            source = inline_params(source, params)
        try:
            self.program = cel.compile(source)
        except Exception as exc:  # the binding raises ValueError with the parser's report
            raise CelError(str(exc).strip()) from None
        self.variables = frozenset(self.program.variables())
        self.fields = field_usage(source)

    def __call__(self, context: cel.Context) -> Any:
        return self.program.execute(context)


class Template:
    """A message with ``{{ cel }}`` segments, compiled once, rendered only on failure."""

    def __init__(self, text: str, params: dict | None = None):
        self.parts: list[str | Expression] = []
        position = 0
        for match in _TEMPLATE.finditer(text):
            self.parts.append(text[position:match.start()])
            self.parts.append(Expression(match.group(1).strip(), params))
            position = match.end()
        self.parts.append(text[position:])
        expressions = [p for p in self.parts if isinstance(p, Expression)]
        self.variables = frozenset().union(*(p.variables for p in expressions))
        self.fields = merge_usage(p.fields for p in expressions)

    def render(self, context: cel.Context) -> str:
        out = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            try:
                value = part(context)
            except Exception:
                value = "?"
            out.append(_display(value))
        return "".join(out).strip()


def _display(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(_display(v) for v in value)
    return str(value)
