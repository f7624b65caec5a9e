"""The common case of a few calls and operators, written inline in the generated code (webhook/cel/compiler.py).

Why: a Python call costs more than the work of `size(list)`, `sign(quantity)` or `x == 1`, and rules make
such calls in every container of every review. Each fast path tests the operand types it answers for and leaves
every other case (and so every error) to the very function the call would have made: the result is that
function's, by construction. Only the library's own functions are inlined (checked by identity), so a table that
maps a name to something else is called as it is. The binary operators' code is here too (`Operators`, mixed into
the compiler's generator): each is such a fast path in front of its runtime function.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from webhook.cel import library
from webhook.cel import runtime as rt
from webhook.cel.values import INT64_MAX, INT64_MIN

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


def step(value: str, key: Any) -> str:
    """One step of a path from the local `value`, as generated code walks it (cel/compiler.py `_path`):
    a map's field or a list's index inline, every other case (and every error) runtime.select's or index's."""
    if type(key) is str:
        return f"{value}[{key!r}] if type({value}) is dict else _sel({value}, {key!r})"
    if key >= 0:
        return f"{value}[{key}] if type({value}) is list else _idx({value}, {key})"
    return f"_idx({value}, {key})"


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
    is, anything else runtime.iterable's error (it returns only a list or a map: `items` is never rebound)."""
    return f"if type({items}) is not list and type({items}) is not dict: _iter({items}, {macro!r})"


def _literal_type(node: tuple) -> type | None:
    """The Python type of a literal node (bool is not an int here), None for anything computed."""
    return type(node[1]) if node[0] == "lit" else None


class Operators:
    """The native compiler's binary operators (cel/compiler.py mixes this in): the same-typed common case inline,
    every other case (and every error) left to the runtime function (`_eq`, `_less`, `_in`, `_add`, `_arith`)."""

    def _binary(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        _, op, left_node, right_node = node
        left = self.atom(left_node, out, indent, scope)
        right = self.atom(right_node, out, indent, scope)
        if op in ("==", "!="):
            for this, that in ((left_node, right), (right_node, left)):
                if this[0] == "lit" and type(this[1]) is str:  # `x == "Memory"`: the common case, inline
                    test = f"(type({that}) is str and {that} == {this[1]!r})"
                    return test if op == "==" else f"(not {test})"
            test = equals(left, right, _literal_type(right_node)) or \
                equals(right, left, _literal_type(left_node)) or f"_eq({left}, {right})"
            return test if op == "==" else f"(not {test})"
        if op in ("<", "<=", ">", ">="):
            kinds = (_literal_type(left_node), _literal_type(right_node))
            if kinds[0] in (int, float) and kinds[1] in (int, float) and kinds[0] is kinds[1]:
                return f"({left} {op} {right})"
            if kinds[0] in (int, float) or kinds[1] in (int, float):  # one literal: the other of its very type
                literal = kinds[0] if kinds[0] in (int, float) else kinds[1]
                other = right if kinds[0] in (int, float) else left
                check = f"type({other}) is {literal.__name__}"
                nan = f"{other} != {other}" if literal is float else None  # a literal is never NaN
            else:  # same Python type, int or float: a mixed pair compares as doubles in _less (cel-go)
                check = f"type({left}) is type({right}) and (type({left}) is float or type({left}) is int)"
                nan = f"{left} != {left} or {right} != {right}"
            # a NaN orders as false in Python, an error in CEL: looked for only when the comparison said false
            test = f"({left} {op} {right})" if nan is None else f"({left} {op} {right} or (({nan}) and _unordered()))"
            return f"({test} if {check} else _less({left}, {right}, {op!r}))"
        if op == "in":
            # a str in a map or a list: what runtime.contains does for it, inline
            checks = [f"(type({right}) is dict or type({right}) is list)"] + \
                ([] if _literal_type(left_node) is str else [f"type({left}) is str"])
            return f"(({left} in {right}) if {' and '.join(checks)} else _in({right}, {left}))"
        if op == "+":
            return add(left, right, self.name("s"))
        if op == "*":
            checks = [f"type({text}) is float" for text, operand in ((left, left_node), (right, right_node))
                      if _literal_type(operand) is not float]
            if not checks:
                return f"({left} * {right})"
            return f"(({left} * {right}) if {' and '.join(checks)} else _arith('*', {left}, {right}))"
        return f"_arith({op!r}, {left}, {right})"
