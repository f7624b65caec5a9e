"""The common case of a few calls and operators, written inline in the generated code (webhook/cel/compiler.py).

Why: a Python call costs more than the work of `size(list)`, `sign(quantity)` or `x == 1`, and rules make
such calls in every container of every review. Each fast path tests the operand types it answers for and leaves
every other case (and so every error) to the very function the call would have made: the result is that
function's, by construction. Only the library's own functions are inlined (checked by identity), so a table that
maps a name to something else is called as it is.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from webhook.cel import library
from webhook.cel import runtime as rt
from webhook.cel.parser import INT64_MAX, INT64_MIN

# name the generated code reads -> the value it stands for (the compiler adds these to the program's namespace)
NAMESPACE = {"_QV": library.QUANTITIES}


def _sign(function: Callable, values: list, constant: Callable[[Any], str]) -> str:
    x = values[0]
    return f"((({x} > 0.0) - ({x} < 0.0)) if type({x}) is float else {constant(function)}({x}))"


def _float_of(function: Callable, values: list, constant: Callable[[Any], str]) -> str:
    x = values[0]
    return f"({x} if type({x}) is float else {constant(function)}({x}))"


def _quantity(function: Callable, values: list, constant: Callable[[Any], str]) -> str:
    x = values[0]  # a string parsed before: library.quantity's own memo, read without the call
    return f"(_QV[{x}] if type({x}) is str and {x} in _QV else {constant(function)}({x}))"


def _size(function: Callable, values: list, constant: Callable[[Any], str]) -> str:
    x = values[0]  # a str's len counts code points, as CEL's size does
    return f"(len({x}) if type({x}) is list or type({x}) is dict or type({x}) is str else {constant(function)}({x}))"


_CALLS: dict[str, tuple[Callable, Callable]] = {
    "size": (rt.size, _size),
    "sign": (library.FUNCTIONS["sign"].call, _sign),
    "asApproximateFloat": (library.FUNCTIONS["asApproximateFloat"].call, _float_of),
    "quantity": (library.FUNCTIONS["quantity"].call, _quantity),
}


def call(name: str, function: Callable, values: list, constant: Callable[[Any], str]) -> Optional[str]:
    """Inline code for `function(*values)` (values are names or literals: safe to mention twice), or None."""
    found = _CALLS.get(name)
    if found is None or found[0] is not function or len(values) != 1:
        return None
    return found[1](function, values, constant)


def equals(left: str, right: str, literal: Optional[type]) -> Optional[str]:
    """`left == right` where `right` is an int or double literal: the same-typed case inline, else runtime.equals
    (which compares numbers across int, uint and double)."""
    if literal is int or literal is float:
        return f"(({left} == {right}) if type({left}) is {literal.__name__} else _eq({left}, {right}))"
    return None


def add(left: str, right: str, local: str) -> str:
    """`left + right`: two ints inline (their sum in `local`), CEL's int64 overflow error left to runtime.add."""
    return (f"({local} if type({left}) is int and type({right}) is int and "
            f"{INT64_MIN} <= ({local} := {left} + {right}) <= {INT64_MAX} else _add({left}, {right}))")


def iterable(items: str, macro: str) -> str:
    """What a comprehension walks (runtime.iterable), as a statement on the local `items`: a list or a map as it
    is, anything else runtime.iterable's error."""
    return f"if type({items}) is not list and type({items}) is not dict: {items} = _iter({items}, {macro!r})"
