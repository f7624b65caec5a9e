"""The CEL environment rules are written in: checked at load by aiadmit's own checker, compiled on first use.

Every expression is parsed and checked at policy load against the declarations
of its rule's level (cel/checker.py: undeclared names, unknown functions, wrong
arity, type errors decidable without data, too deep, too costly by the static
estimate of cel/cost.py), with errors at the offset in the source as the author
wrote it; parameters are a declared constant `params` for the check and folded
into the program as literals for the run. It is compiled on first use into a
Python function (webhook/cel/compiler.py) that reads the admission objects in
place; the reference library (``common-expression-language``, Rust) runs only
the rare checked expression that uses CEL the native compiler does not
implement (timestamps, durations). Both choices were made by measurement
(bench/RESULTS.md). The function library is cel/library.py.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Optional

from webhook.cel.compiler import compile_native
from webhook.cel.constants import Struct, type_of_value
from webhook.cel.library import CALLABLES, FUNCTIONS as LIBRARY
from webhook.cel.limits import Limits
from webhook.cel.templates import compile_template, display
from webhook.cel.values import ParseError, Unsupported
from webhook.model.lazyre import Lazy

# The parser, the checker, the cost estimate and the portability check (`checked`, `refusal`) are imported where a
# load runs them: a command-line run whose bundle was kept whole (language/bundlecache.py) checks nothing, and
# importing them was about a tenth of its warm one-file audit (bench/RESULTS.md, 2026-12-07, h-warm).

_TEMPLATE = Lazy(r"\{\{(.+?)\}\}", re.S)
FUNCTIONS = {name: function.call for name, function in LIBRARY.items()}  # what generated programs call


class CelError(ValueError):
    """An expression that does not load: `offset` (0-based, in the source as written) is where, when known."""

    def __init__(self, message: str, offset: Optional[int] = None, param: Optional[tuple] = None):
        super().__init__(message if offset is None else f"{message} at column {offset + 1}")
        self.message = message
        self.offset = offset
        self.param = param  # the param (name[, index]) whose value is the mistake: reported where it is written


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
        for name, function in CALLABLES.items():
            context.add_function(name, function)
        for name in self.names:
            if name in activation:
                context.add_variable(name, activation[name])
        return self.program.execute(context)


def _reference_library() -> Any:
    """The reference CEL library (Rust), loaded on first need: a command line whose checks the disk cache
    answers, and whose expressions all compile natively, never loads it."""
    from webhook.cel.reference import cel

    return cel


def _compile(source: str, memo: Any, qualified: frozenset = frozenset(),
             inline: Optional[Mapping[str, str]] = None) -> Any:
    """The native program for `source`, or the reference library's when the native compiler lacks a feature.

    `inline`: the sources of the policy's named variables, compiled into the program where it reads them (each still
    evaluated at most once per binding); without them if that is too deep for Python.
    Only a source aiadmit's checker accepted gets here: nothing deeper or longer than the reference library takes.
    """
    if inline:
        try:
            return compile_native(source, FUNCTIONS, memo, qualified, inline)
        except (Unsupported, ParseError):
            pass
    try:
        return compile_native(source, FUNCTIONS, memo, qualified)  # `memo.compile` may answer from a cache
    except (Unsupported, ParseError):
        return _Reference(_reference_library().compile(source))


_PARAM = Lazy(r"\bparams\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_STRING = Lazy(r"""[rR]?(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")""", re.S)


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
    if "params" not in source:  # most expressions name none: nothing to replace, no scan of the source
        return source
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


_PRESENCE = Lazy(r"^has\(\s*(container|pod|podMeta|object)((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)+)\s*\)$")


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
    return presence_in(conjuncts(source))


def presence_in(parts: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The `has(container.a.b)` guards among `parts`, the conjuncts of a source (`required_presence` of it)."""
    out = []
    for part in parts:
        match = _PRESENCE.match(part)
        if match:
            path = tuple(token.strip() for token in match.group(2).split(".") if token.strip())
            out.append((match.group(1), path))
    return tuple(out)


def params_type(params: Mapping[str, Any]) -> Struct:
    """`params` as the checker sees it: a closed struct, so a misspelt parameter name fails at load."""
    return Struct("params", {name: type_of_value(value) for name, value in params.items()})


def checked(source: str, params: Optional[dict], declarations: Optional[Mapping[str, Any]],
            limits: Optional[Limits] = None, kubernetes: bool = True,
            constants: Optional[Mapping[str, list]] = None) -> tuple[frozenset, bool, Any, frozenset]:
    """Parse, check and cost `source` as written: (the variables it reads, whether it needs the reference library,
    its type as the checker found it, the policy variables it reads by name: `variables.NAME`, or "*" (checker.WHOLE)
    when it reads `variables` whole).

    Raises CelError with the offset in `source`. `declarations` None: every free name is a dyn variable.
    `kubernetes` False: cel-go's checker only, without Kubernetes' literal validators (cel/strictness.py), as the
    CEL conformance suite is written for; every policy is checked with them. `constants`: the policy's named
    variables that are constants of its params (cel/patterns.py), checked where they are read like the params."""
    from webhook.cel import cost as costs
    from webhook.cel.checker import CheckError, MAX_LENGTH, check
    from webhook.cel.parser import parse_with_positions

    if len(source) > MAX_LENGTH:
        raise CelError(f"expression longer than {MAX_LENGTH} characters", 0)
    try:
        tree, positions = parse_with_positions(source)
    except ParseError as exc:
        raise CelError(str(exc).split(" at column ")[0], exc.column - 1) from None
    lenient = declarations is None
    declarations = dict(declarations or {})
    if params is not None:
        declarations["params"] = params_type(params)
    try:
        checker = check(tree, positions, declarations, LIBRARY, lenient, kubernetes, params, constants)
        kind = checker.type
        costs.estimate(tree, positions, params or {}, limits)
    except CheckError as exc:
        raise CelError(exc.message, exc.offset, exc.param) from None
    return frozenset(checker.free - {"params"}), checker.reference_only, kind, frozenset(checker.named)


def _refusal(source: str, portable: Any) -> Optional[tuple]:
    """What the API server of version `portable` refuses in `source` (cel/portability.py), or None."""
    from webhook.cel.portability import refusal

    return refusal(source, portable)


class Expression:
    """A CEL expression checked at load, compiled on first use, and the variables it reads.

    Checking every expression at load keeps a bad policy from loading; compiling
    to Python waits for the first run, because most expressions never run in a
    given process (mutations in an audit, messages of rules that pass).
    """

    __slots__ = ("source", "compiled", "_program", "variables", "_memo", "reference", "type", "inline", "named")

    def __init__(self, source: str, params: dict | None = None, memo: Any = None,
                 declarations: Optional[Mapping[str, Any]] = None, limits: Optional[Limits] = None,
                 kubernetes: bool = True, portable: Any = None, constants: Optional[Mapping[str, list]] = None):
        """`declarations` maps each variable the rule's level binds to its type (None: any name, as dyn);
        `memo` (duck-typed: language/checks.py `Checks`) may answer the check, `checked(source, params,
        declarations, limits, checked)`, and Python's compile: `compile(python, filename)`; `kubernetes` False
        leaves out Kubernetes' literal validators (`checked`), and the memo's record, which holds checks with them;
        `portable` (a k8s/versions.py KubernetesVersion, or None) refuses what that API server refuses
        (cel/portability.py); `constants` (see `checked`) is part of what the memo's answer is found by."""
        self.source = source
        recorded = getattr(memo, "checked", None) if kubernetes else None  # the bundle's record (language/checks.py)
        if recorded is None:
            found = checked(source, params, declarations, limits, kubernetes, constants)
        elif constants:
            found = recorded(source, params, declarations, limits, checked, constants)
        else:
            found = recorded(source, params, declarations, limits, checked)
        variables, self.reference, self.type, self.named = found
        refused = _refusal(source, portable) if portable is not None else None
        if refused is not None:
            raise CelError(*refused)
        if params is not None:
            try:
                source = inline_params(source, params)
            except CelError as exc:  # the checker names unknown params; a value with no literal is left
                raise CelError(exc.message, 0) from None
        self._memo = memo
        self._program = None
        self.compiled = source
        self.variables = variables
        self.inline: Optional[Mapping[str, str]] = None  # named variables' sources, set by the policy compiler

    @property
    def program(self) -> Any:
        if self._program is None:  # two threads may both compile it: the same program, either one kept
            self._program = _compile(self.compiled, self._memo,
                                     frozenset(name for name in self.variables if "." in name), self.inline)
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

    def __init__(self, text: str, params: dict | None = None, memo: Any = None,
                 declarations: Optional[Mapping[str, Any]] = None, limits: Optional[Limits] = None,
                 portable: Any = None, constants: Optional[Mapping[str, list]] = None):
        self.parts: list[str | Expression] = []
        self._memo, self._render = memo, None
        position = 0
        for match in _TEMPLATE.finditer(text):
            self.parts.append(text[position:match.start()])
            segment = match.group(1)
            start = match.start(1) + len(segment) - len(segment.lstrip())
            try:
                self.parts.append(Expression(segment.strip(), params, memo, declarations, limits,
                                             portable=portable, constants=constants))
            except CelError as exc:  # the offset in the whole message, as written
                raise CelError(exc.message, None if exc.offset is None else start + exc.offset, exc.param) from None
            position = match.end()
        self.parts.append(text[position:])
        # (text before, expression) pairs and the text after: what render walks, without a type test per part
        self._segments = tuple(zip(self.parts[0:-1:2], self.parts[1::2]))
        self._tail = self.parts[-1]
        self.expressions = tuple(expression for _, expression in self._segments)
        self.variables = frozenset().union(*(expression.variables for expression in self.expressions))
        self.named = frozenset().union(*(expression.named for expression in self.expressions))  # of the {{ }} only

    def render(self, context: Activation) -> str:
        """The message for the variables in `context`: a segment that fails shows as "?", never fails the review."""
        function = self._render
        if function is None:
            function = self.program
        return function(context)

    @property
    def program(self) -> Any:
        """The function rendering the message, compiled on first use (a server compiles it before serving)."""
        if self._render is None:  # two threads may both compile it: the same function, either one kept
            self._render = self._compile()
        return self._render

    def _compile(self) -> Any:
        """One generated function for the whole message (cel/templates.py), on its first render (after the policy
        compiler has set each expression's `inline`); segment by segment when one runs on the reference library."""
        texts = self.parts[0::2]
        try:
            return compile_template(texts, [(e.compiled, frozenset(n for n in e.variables if "." in n), e.inline)
                                            for e in self.expressions], FUNCTIONS, self._memo)
        except (Unsupported, ParseError):
            return self._render_segments

    def _render_segments(self, context: Activation) -> str:
        out = []
        for text, expression in self._segments:
            out.append(text)
            try:
                value = expression.run(context)
            except Exception:
                value = "?"
            out.append(value if type(value) is str else display(value))
        out.append(self._tail)
        return " ".join("".join(out).split())


class MessageExpression:
    """A VAP `messageExpression`: one CEL expression giving the whole message (a string), rendered on failure.

    Same interface as Template (parts, expressions, variables, render); an error or a non-string renders the
    rule's `message`, if any, else a fixed text, as Kubernetes falls back to the static message."""

    def __init__(self, source: str, params: dict | None = None, memo: Any = None,
                 declarations: Optional[Mapping[str, Any]] = None, limits: Optional[Limits] = None,
                 fallback: Optional["Template"] = None, portable: Any = None,
                 constants: Optional[Mapping[str, list]] = None):
        self.expression = Expression(source, params, memo, declarations, limits, portable=portable,
                                     constants=constants)
        self.fallback = fallback
        self.parts = [self.expression] + (list(fallback.parts) if fallback is not None else [])
        self.expressions = (self.expression,) + (fallback.expressions if fallback is not None else ())
        self.variables = self.expression.variables | (fallback.variables if fallback is not None else frozenset())
        self.named = self.expression.named | (fallback.named if fallback is not None else frozenset())

    def render(self, context: Activation) -> str:
        try:
            value = self.expression.run(context)
        except Exception:  # noqa: BLE001 - a message never fails the review
            value = None
        if type(value) is str and value.strip():
            return " ".join(value.split())
        return self.fallback.render(context) if self.fallback is not None else "the rule's messageExpression failed"

