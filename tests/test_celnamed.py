"""A policy's named variables as generated code reads them (webhook/cel/named.py): a computed variable from the
binding's values dict taken once per program, anything else by the full path it always took.

Each case runs one compiled program with the variables inlined (as the policy compiler compiles a rule) and the
same program without them (each variable then its own program, run by `Variables.get`), over the binding the
engine makes (a `Variables`), a plain map bound as `variables`, and no `variables` at all.
"""

from __future__ import annotations

import pytest

from webhook.cel.compiler import compile_native
from webhook.cel.environment import FUNCTIONS, Activation
from webhook.cel.values import EvalError, Variables

SOURCES = {"ok": "true", "num": "7", "bad": "1 / 0 == 1", "uses": "variables.ok && variables.num > 3",
           "absorbs": "variables.bad || true", "text": "'a'"}


class _Program:
    """A named variable's own program, as `Variables` runs it (`run(context)`), counting its runs."""

    def __init__(self, source: str, runs: dict, name: str):
        self.program, self.runs, self.name = compile_native(source, FUNCTIONS), runs, name

    def run(self, context):
        self.runs[self.name] = self.runs.get(self.name, 0) + 1
        return self.program.execute(context)


def _binding(runs: dict) -> Activation:
    context = Activation()
    context["variables"] = Variables({name: _Program(source, runs, name) for name, source in SOURCES.items()},
                                     context)
    return context


def _outcome(source: str, inline: bool, context: Activation):
    program = compile_native(source, FUNCTIONS, inline=SOURCES if inline else None)
    try:
        return program.execute(context)
    except EvalError as exc:
        return f"error: {exc}"


@pytest.mark.parametrize("inline", [True, False], ids=["inlined", "own programs"])
@pytest.mark.parametrize("source, expected", [
    ("variables.ok && variables.ok && variables.num == 7", True),
    ("variables.uses && variables.num + variables.num == 14", True),
    ("variables.bad", "error: division by zero"),
    ("variables.bad || variables.bad", "error: division by zero"),
    ("variables.bad && false", False),
    ("variables.absorbs && variables.text + 'b' == 'ab'", True),
    ("[1, 2].all(i, variables.num > i)", True),
    ("variables.missing", "error: no such variable: missing"),
    ("variables.num && true", "error: no such overload: &&(int)"),
])
def test_a_binding_s_variables_read_inline_as_by_their_own_programs(inline, source, expected):
    runs: dict = {}
    context = _binding(runs)
    assert _outcome(source, inline, context) == expected
    assert _outcome(source, inline, context) == expected  # a second read: from the values, or the kept error
    assert all(count == 1 for count in runs.values()), runs  # each variable computed at most once per binding


@pytest.mark.parametrize("inline", [True, False], ids=["inlined", "own programs"])
def test_a_plain_map_bound_as_variables_is_read_as_a_map(inline):
    context = Activation(variables={"ok": False, "num": 2})
    assert _outcome("variables.ok || variables.num == 2", inline, context) is True
    assert _outcome("variables.uses", inline, context) == "error: no such key: uses"


@pytest.mark.parametrize("inline", [True, False], ids=["inlined", "own programs"])
def test_no_variables_bound_fails_where_they_are_read_and_is_absorbed(inline):
    context = Activation(x=True)
    assert _outcome("variables.ok", inline, context) == "error: undeclared reference to 'variables'"
    assert _outcome("false && variables.ok", inline, context) is False
    assert _outcome("variables.ok || x", inline, context) is True
