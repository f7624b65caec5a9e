"""CEL compiled to Python functions that read the admission objects where they are.

Why: the reference CEL library (Rust, `common-expression-language`) converts
every bound value into its own representation and copies whatever a field
selection or a comprehension touches; for a GPU pod that was most of the
evaluation time (bench/RESULTS.md). Here an expression becomes the source of
one Python function over the plain dicts and lists the YAML or JSON decoder
produced, compiled once by Python itself: binding a variable is a dict store,
a field selection is a dict lookup behind a type check, a comprehension is a
`for` loop whose variable is a local.

The semantics are CEL's (webhook/cel/runtime.py, conversions.py, library.py)
and are pinned to the reference library by tests/test_celnative.py over every
built-in expression and the whole corpus, and to the CEL specification by the
conformance files (tests/test_celconformance.py). Errors are exceptions; `&&`,
`||`, `all` and `exists` absorb one when another operand decides the answer, as
the specification says. Loops count their steps against runtime.MAX_STEPS
where they can multiply (see `_count`). An expression this compiler cannot turn
into Python (more nested blocks than Python allows) raises Unsupported at
compile time, and webhook/cel/environment.py runs it on the reference library instead.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from webhook.cel import fastpaths, stored
from webhook.cel.namespace import BUILTINS, HELPERS  # noqa: F401 - re-exported
from webhook.cel.values import Unsupported  # noqa: F401 - re-exported: what compile_native raises

class Program:
    """A compiled expression: `execute(activation)` evaluates it over a mapping of variable names to values."""

    __slots__ = ("source", "execute", "python")

    def __init__(self, source: str, function: Callable[[Mapping], Any], python: str):
        self.source = source
        self.execute = function
        self.python = python  # the generated source, for whoever debugs a rule


def compile_native(source: str, functions: Mapping[str, Callable], cache: Any = None,
                   qualified: frozenset = frozenset(), inline: Optional[Mapping[str, str]] = None) -> Program:
    """Compile `source`; ParseError if it is not CEL, Unsupported if it needs the reference library.

    `inline` maps a policy's named variables to their sources: `variables.NAME` then computes NAME in place on its
    first read in the binding and keeps it in the binding's `Variables` (cel/values.py), so a variable costs no
    program call of its own.

    `cache.compile(python, filename)`, when given (language/checks.py), may answer Python's compile of the
    generated source from the command line's disk cache, and `cache.recall_program` the whole program generated
    before from the same key (cel/stored.py). `qualified`: the dotted variable names (`a.b.c`) the
    checker resolved in `source`, read as one variable each (CEL's qualified-name resolution, longest first).
    """
    key = ("native", source, "\0".join(sorted(qualified)), stored.inline_key(inline), stored.functions_key(functions)) \
        if getattr(cache, "keeps_programs", False) else None

    def make() -> tuple[str, dict]:
        from webhook.cel.generator import generate  # only for a program not kept before: a warm run imports no parser

        generator, body, result = generate(source, functions, qualified, inline)
        python = "\n".join([
            "def cel(A):",
            *(["    _n = 0"] if generator.counted else []),  # comprehension steps taken (runtime.MAX_STEPS)
            "    try:",
            *body,
            f"        return {result}",
            "    except Exception as _exc:",
            "        raise _translate(_exc, A, _FREE) from None",
        ])
        return python, dict(generator.constants, _FREE=frozenset(generator.free))

    function, python = stored.load(cache, key, functions, BUILTINS, dict(HELPERS, **fastpaths.NAMESPACE), "cel",
                                   f"<cel {source[:60]!r}>", make)
    return Program(source, function, python)
