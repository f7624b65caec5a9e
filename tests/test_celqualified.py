"""CEL's qualified-name resolution (the spec's "Name Resolution"): a declared variable may have a dotted name.

`a.b.c` reads the declared variable `a.b.c` if there is one, else the field `c` of a declared `a.b`, else the
fields `b.c` of `a`: longest prefix first, in the checker (webhook/cel/checker.py) and the compiled program
(webhook/cel/compiler.py) alike. The conformance files (fields, namespace) test it; these pin the edges.
"""

from __future__ import annotations

import pytest

from webhook.cel.checker import DYN
from webhook.cel.environment import CelError, Expression, new_context


def _run(source: str, bindings: dict):
    expression = Expression(source, declarations={name: DYN for name in bindings})
    assert expression.native, source
    context = new_context()
    context.update(bindings)
    return expression, expression.run(context)


def test_a_dotted_variable_is_read_whole():
    expression, value = _run("a.b.c", {"a.b.c": "yeah"})
    assert value == "yeah" and expression.variables == {"a.b.c"}


def test_the_longest_declared_prefix_wins():
    expression, value = _run("a.b.c", {"a.b.c": "yeah", "a.b": {"c": "oops"}})
    assert value == "yeah" and expression.variables == {"a.b.c"}


def test_a_shorter_prefix_then_selects_the_rest_as_fields():
    assert _run("a.b.c.d", {"a.b": {"c": {"d": 1}}})[1] == 1
    assert _run("a.b.c[1]", {"a.b": {"c": [5, 6]}})[1] == 6
    assert _run("has(a.b.c)", {"a.b": {"c": 1}})[1] is True
    assert _run("has(a.b.x)", {"a.b": {"c": 1}})[1] is False
    assert _run("x.y && a.b.c == 'v'", {"x.y": True, "a.b": {"c": "v"}})[1] is True


def test_an_undotted_variable_still_wins_when_no_dotted_name_matches():
    assert _run("a.b", {"a": {"b": 3}, "x.y": 0})[1] == 3


def test_a_comprehension_variable_shadows_a_dotted_name():
    assert _run("[{'b': 1}].all(a, a.b == 1)", {"a.b": 2})[1] is True


@pytest.mark.parametrize("source", ["a.b", "a", "a.x.c"])
def test_a_prefix_of_a_dotted_name_is_not_declared(source):
    with pytest.raises(CelError, match="undeclared reference to 'a'") as caught:
        Expression(source, declarations={"a.b.c": DYN})
    assert caught.value.offset == 0
