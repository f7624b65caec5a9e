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


class Expression:
    """A compiled CEL program and the variables it reads (known statically)."""

    __slots__ = ("source", "program", "variables")

    def __init__(self, source: str):
        self.source = source
        try:
            self.program = cel.compile(source)
        except Exception as exc:  # the binding raises ValueError with the parser's report
            raise CelError(str(exc).strip()) from None
        self.variables = frozenset(self.program.variables())

    def __call__(self, context: cel.Context) -> Any:
        return self.program.execute(context)


class Template:
    """A message with ``{{ cel }}`` segments, compiled once, rendered only on failure."""

    def __init__(self, text: str):
        self.parts: list[str | Expression] = []
        position = 0
        for match in _TEMPLATE.finditer(text):
            self.parts.append(text[position:match.start()])
            self.parts.append(Expression(match.group(1).strip()))
            position = match.end()
        self.parts.append(text[position:])
        self.variables = frozenset().union(*(p.variables for p in self.parts if isinstance(p, Expression)))

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
