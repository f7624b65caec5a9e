"""The values CEL has beyond JSON's, and its errors: uint, optionals, a policy's lazy `variables`, EvalError.

Kept apart from runtime.py (the operators) so that each module stays one job; runtime re-exports them. The uint
type, the integer bounds and ParseError are here rather than in the lexer, which defines its literals with them:
a run whose programs were all generated before (cel/stored.py) imports no lexer, parser or checker.
"""

from __future__ import annotations

import weakref
from types import MappingProxyType
from typing import Any

INT64_MIN, INT64_MAX, UINT64_MAX = -(2 ** 63), 2 ** 63 - 1, 2 ** 64 - 1


class UInt(int):
    """A CEL uint: a Python int that remembers its type (`1u`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class ParseError(ValueError):
    """A source that is not CEL (cel/lexer.py, cel/parser.py); `column` is 1-based."""

    def __init__(self, message: str, source: str, position: int):
        self.column = position + 1
        super().__init__(f"{message} at column {self.column} of {source!r}")


class EvalError(Exception):
    """A CEL evaluation error: an error value that reached the top of the expression."""


class Unsupported(Exception):
    """The expression uses CEL this compiler does not implement; the reference library runs it."""


class Optional:
    """A CEL optional (`x.?f`, `optional.of(v)`): `value`, or none when it is the NONE instance."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return "optional.none()" if self is NONE else f"optional.of({self.value!r})"


NONE = Optional(None)


class Variables:
    """A policy's `variables` in one binding: each evaluated on first read, at most once, then kept (VAP's
    semantics); an error is kept too, and raised wherever the variable is read.

    The context holds this object as `variables`, so an Activation is held here by a weak reference: a strong one
    made a reference cycle per evaluated resource, which left each Activation and what it bound to the cyclic
    collector (89 of the corpus's 179 resources, measured with gc.DEBUG_SAVEALL). A plain dict cannot be referred
    to weakly and is held as it is: its owner (Engine.evaluate's context, whose reads a dict subclass made slower:
    engine/core.py) takes `variables` out of it when it is done, which ends the cycle.

    `values` holds only the successes, so generated code reads a computed variable straight from it
    (cel/compiler.py) and calls `get` only for the first read or a failure."""

    __slots__ = ("programs", "context", "values", "failed")

    def __init__(self, programs: dict, context: Any):
        self.programs, self.values, self.failed = programs, {}, _NO_FAILURES
        self.context = context if type(context) is dict else weakref.ref(context)

    def fail(self, name: str, error: Exception) -> None:
        """Keep `error` as the value of `name` in this binding (the dict is made on the first failure)."""
        if self.failed is _NO_FAILURES:
            self.failed = {}
        self.failed[name] = error

    def get(self, name: str) -> Any:
        found = self.values.get(name, _UNSET)
        if found is not _UNSET:
            return found
        error = self.failed.get(name)
        if error is not None:
            raise error
        program = self.programs.get(name)
        if program is None:
            raise EvalError(f"no such variable: {name}")
        try:
            context = self.context
            found = program.run(context if type(context) is dict else context())
        except Exception as exc:  # noqa: BLE001 - kept, and raised at every read
            self.fail(name, exc)
            raise
        self.values[name] = found
        return found


NO_VALUES = MappingProxyType({})  # a program's `_W` when `variables` is not a Variables (cel/named.py)
_UNSET = object()
_NO_FAILURES: dict = {}  # shared and never written: most bindings have no failed variable
