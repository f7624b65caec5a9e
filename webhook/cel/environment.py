"""The CEL environment rules are written in.

Every expression is checked at policy load by the reference CEL library
(``common-expression-language``, Rust), so errors read as CEL's own (on the
command line, an expression that very checker accepted before is recalled from
the disk cache, webhook/app/diskcache.py, with the variables it found), and is
compiled on first use into a Python function (webhook/cel/compiler.py) that reads
the admission objects in place; the reference library runs the rare expression
that uses CEL the native compiler does not implement. Both choices were made by
measurement (bench/RESULTS.md).
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
from functools import lru_cache
from typing import Any, Callable

from webhook.cel.compiler import Unsupported, compile_native
from webhook.cel.parser import ParseError

from webhook.model.quantity import QuantityError, format_bytes, parse_quantity
from webhook.k8s.quotascope import quota_selects

_TEMPLATE = re.compile(r"\{\{(.+?)\}\}", re.S)


class CelError(ValueError):
    """An expression that does not compile."""


_QUANTITIES: dict[str, float] = {}  # "48Gi" -> 51539607552.0: pods repeat a few dozen sizes


def _quantity(value: Any) -> float:
    if type(value) is str:
        found = _QUANTITIES.get(value)
        if found is not None:
            return found
    try:
        parsed = float(parse_quantity(value))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    if type(value) is str and len(_QUANTITIES) < 4096:
        _QUANTITIES[value] = parsed
    return parsed


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


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _re_matches(value: Any, pattern: Any) -> bool:
    if not isinstance(value, str) or not isinstance(pattern, str):
        raise TypeError("matches() takes a string and a pattern")
    return _regex(pattern).search(value) is not None


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
    # Kubernetes' matches(), through a cached pattern (Expression rewrites `matches(` to `reMatches(`)
    "reMatches": _re_matches,
    # Kubernetes quota scopes: does this ResourceQuota charge this pod (webhook/k8s/quotascope.py)
    "quotaSelects": quota_selects,
}


class Activation(dict):
    """The variables of one evaluation, by name: native programs read it as it is (`context["pod"] = spec`)."""


def new_context() -> Activation:
    return Activation()


class _Reference:
    """An expression run on the reference CEL library (what the native compiler does not implement).

    Each run converts the variables it reads into a fresh context: slow (see
    bench/RESULTS.md), which is why it is only the fallback.
    """

    __slots__ = ("program", "names")

    def __init__(self, program):
        self.program = program
        self.names = tuple(program.variables())

    def execute(self, activation: dict) -> Any:
        context = _reference_library().Context()
        for name, function in FUNCTIONS.items():
            context.add_function(name, function)
        for name in self.names:
            if name in activation:
                context.add_variable(name, activation[name])
        return self.program.execute(context)


def _check(source: str, memo: Any) -> tuple[list, Any]:
    """(the variables `source` reads, the reference library's checked program or None when `memo` knew it).

    Raises CelError with the reference parser's report, which names line and column.
    """
    known = memo.cel_variables(source) if memo is not None else None
    if known is not None:  # the same checker accepted this very source before: its variables were kept
        return known, None
    try:
        checked = _reference_library().compile(source)
    except Exception as exc:  # the binding raises ValueError with the parser's report
        raise CelError(str(exc).strip()) from None
    variables = sorted(checked.variables())
    if memo is not None:
        memo.remember_cel(source, variables)
    return variables, checked


def _reference_library() -> Any:
    """The reference CEL library (Rust), loaded on first need: a command line whose checks the disk cache
    answers, and whose expressions all compile natively, never loads it."""
    from webhook.cel.reference import cel

    return cel


def _compile(source: str, checked: Any, memo: Any) -> Any:
    """The native program for `source`, or the reference library's when the native compiler lacks a feature."""
    try:
        return compile_native(source, FUNCTIONS, memo)  # `memo.compile` may answer Python's compile from a cache
    except (Unsupported, ParseError):
        return _Reference(checked if checked is not None else _reference_library().compile(source))


_MATCHES = re.compile(r"\bmatches(\s*\()")
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


def _outside_strings(source: str, rewrite) -> str:
    """Apply `rewrite` to the code between string literals, never inside them."""
    out, position = [], 0
    for string in _STRING.finditer(source):
        out.append(rewrite(source[position:string.start()]))
        out.append(string.group(0))
        position = string.end()
    out.append(rewrite(source[position:]))
    return "".join(out)


def inline_params(source: str, params: dict) -> str:
    """Replace `params.NAME` by the parameter's literal, outside string literals.

    Parameters are constants once the config is loaded, so they are folded into
    the program at compile time: nothing to bind per evaluation, and a typo in a
    parameter name fails the policy at load instead of at the first review.
    """
    return _outside_strings(source, lambda code: _inline(code, params))


def _inline(code: str, params: dict) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in params:
            raise CelError(f"unknown parameter {name!r} (known: {', '.join(sorted(params)) or 'none'})")
        return "(" + literal(params[name]) + ")"
    return _PARAM.sub(replace, code)


def _code(source: str) -> str:
    """The expression with every string literal blanked to the same length: patterns then see only code."""
    return _STRING.sub(lambda string: '"' + " " * (len(string.group(0)) - 2) + '"', source)


_PRESENCE = re.compile(r"^has\(\s*(container|pod|podMeta|object)((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)+)\s*\)$")


def conjuncts(source: str) -> list[str]:
    """The top-level `&&` operands of an expression (split outside brackets and strings)."""
    masked = _code(source)  # same length as the source: string contents can hold no bracket or `&&`
    parts, depth, start, position = [], 0, 0, 0
    while position < len(masked):
        char = masked[position]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and masked.startswith("&&", position):
            parts.append(source[start:position].strip())
            start = position + 2
            position += 1
        position += 1
    parts.append(source[start:].strip())
    return parts


def required_presence(source: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Fields that must exist for `source` to be true: its top-level `has(container.a.b)` conjuncts.

    `has(x.f) && rest` is false whenever x.f is absent, whatever `rest` is, so
    the engine checks these in Python first and runs no CEL (binds nothing) for
    a rule whose guard cannot hold. For a pod that is not an AI workload this
    is the difference between microseconds and a CEL evaluation.
    """
    out = []
    for part in conjuncts(source):
        match = _PRESENCE.match(part)
        if match:
            path = tuple(token.strip() for token in match.group(2).split(".") if token.strip())
            out.append((match.group(1), path))
    return tuple(out)


class Expression:
    """A CEL expression checked at load (or recalled as checked), compiled on first use, and the variables it reads.

    Checking every expression at load (the reference parser: fast) keeps a bad
    policy from loading; compiling to Python waits for the first run, because
    most expressions never run in a given process (mutations in an audit,
    messages of rules that pass): a CLI run then starts in a third of the time.
    """

    __slots__ = ("source", "compiled", "_checked", "_program", "variables", "_memo")

    def __init__(self, source: str, params: dict | None = None, memo: Any = None):
        """`memo` (duck-typed: language/checks.py `Checks`) knows the checks and compiles of sources seen before:
        `cel_variables(source)`, `remember_cel(source, variables)`, `compile(python, filename)`."""
        self.source = source
        if params is not None:
            source = inline_params(source, params)
        # Kubernetes' `matches` compiles its regular expression on every call in the reference library (80 µs for
        # a digest pattern); the same RE2-style search through a cached Python pattern costs 1 µs.
        source = _outside_strings(source, lambda code: _MATCHES.sub(r"reMatches\1", code))
        variables, checked = _check(source, memo)
        self._memo = memo
        self._checked = checked
        self._program = None
        self.compiled = source
        self.variables = frozenset(variables)

    @property
    def program(self) -> Any:
        if self._program is None:  # two threads may both compile it: the same program, either one kept
            self._program = _compile(self.compiled, self._checked, self._memo)
        return self._program

    @property
    def native(self) -> bool:
        return not isinstance(self.program, _Reference)

    def run(self, context: Activation) -> Any:
        program = self._program
        if program is None:
            program = self.program
        return program.execute(context)

    __call__ = run


class Template:
    """A message with ``{{ cel }}`` segments, compiled once, rendered only on failure."""

    def __init__(self, text: str, params: dict | None = None, memo: Any = None):
        self.parts: list[str | Expression] = []
        position = 0
        for match in _TEMPLATE.finditer(text):
            self.parts.append(text[position:match.start()])
            self.parts.append(Expression(match.group(1).strip(), params, memo))
            position = match.end()
        self.parts.append(text[position:])
        # (text before, expression) pairs and the text after: what render walks, without a type test per part
        self._segments = tuple(zip(self.parts[0:-1:2], self.parts[1::2]))
        self._tail = self.parts[-1]
        self.expressions = tuple(expression for _, expression in self._segments)
        self.variables = frozenset().union(*(expression.variables for expression in self.expressions))

    def render(self, context: Activation) -> str:
        out = []
        for text, expression in self._segments:
            out.append(text)
            try:
                value = expression.run(context)
            except Exception:
                value = "?"
            out.append(value if type(value) is str else _display(value))
        out.append(self._tail)
        return " ".join("".join(out).split())


def _display(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(_display(v) for v in value)
    return str(value)
