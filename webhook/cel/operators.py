"""The types of CEL's binary operators at load, as cel-go's checker decides them (with Kubernetes' options).

Why its own module: the overloads of `==`, `in`, `<` and the arithmetic operators are the part of the checker
(cel/checker.py) where aiadmit was more lenient than Kubernetes: `1 == 1.0`, `'a' in [1]` and `[1] + ['a']`
loaded. cel-go declares `==`/`!=` as `(A, A) -> bool`, `in` as `(A, list(A))` and `(A, map(A, B))`, list `+` as
`(list(A), list(A))`, and, with Kubernetes' CrossTypeNumericComparisons, `<`, `<=`, `>`, `>=` across int, uint
and double; a dyn operand fits any of them. Kubernetes' quantity has methods, not operators.
"""

from __future__ import annotations

from typing import Any

from webhook.cel import strictness as strict
from webhook.cel.constants import DYN, show

_NUMERIC = frozenset({"int", "uint", "double"})
_ORDERED = frozenset({"int", "uint", "double", "string", "bytes", "bool", "quantity", "timestamp", "duration"})
_TIME = {("+", "timestamp", "duration"): "timestamp", ("+", "duration", "timestamp"): "timestamp",
         ("+", "duration", "duration"): "duration", ("-", "timestamp", "timestamp"): "duration",
         ("-", "timestamp", "duration"): "timestamp", ("-", "duration", "duration"): "duration"}
# What an operator takes beside a dyn (timestamps and durations are dyn to the checker; null is assignable to them)
_WITH_DYN = {**dict.fromkeys(("<", "<=", ">", ">="), _ORDERED | {"null"}),
             "+": frozenset({"int", "uint", "double", "string", "bytes", "list", "null", "timestamp", "duration"}),
             "-": _NUMERIC | {"null", "timestamp", "duration"}, "*": _NUMERIC, "/": _NUMERIC,
             "%": frozenset({"int", "uint"})}
# Kubernetes' quantity has methods, not operators: "quantities <this>, not <op>"
_QUANTITY_METHOD = {**dict.fromkeys(("<", "<=", ">", ">="), "compare with isLessThan/isGreaterThan/compareTo"),
                    **dict.fromkeys("+-", "add and subtract with add()/sub()"),
                    **dict.fromkeys("*/%", "have no arithmetic: use asApproximateFloat() or asInteger() and compute"),
                    **dict.fromkeys(("==", "!="), "equal only quantities: use compareTo(...) == 0")}


def binary(checker: Any, node: tuple, left: Any, right: Any) -> Any:
    """The type of `left op right` (node = ("binary", op, ...)), or the checker's CheckError at the operator."""
    op = node[1]
    mismatch = checker.fail(node, f"no matching overload for {op!r} applied to ({show(left)}, {show(right)})")
    base = strict._head
    if "quantity" in (left, right) and op != "in" and not (op in ("==", "!=") and {left, right} <= {
            "quantity", DYN, "null"}):
        raise checker.fail(node, f"quantities {_QUANTITY_METHOD[op]}, not {op} ({show(left)}, {show(right)})")
    if op in ("==", "!="):  # (A, A): no cross-type equality overload (`1 == 1.0` does not compile; dyn(1) == 1.0 does)
        if strict.unify(left, right) is None:
            raise mismatch
        return "bool"
    if op == "in":  # (A, list(A)) and (A, map(A, B))
        inside = strict.element(right)
        if inside is None or strict.unify(left, inside) is None:
            raise mismatch
        return "bool"
    if DYN in (left, right):
        other = right if left == DYN else left
        if other != DYN and base(other) not in _WITH_DYN[op]:  # `[1] < x`, `'a' - x`: no overload takes it
            raise mismatch
        return "bool" if op in ("<", "<=", ">", ">=") else other
    if op in ("<", "<=", ">", ">="):
        a, b = base(left), base(right)
        if (a == b and a in _ORDERED) or {a, b} <= _NUMERIC:
            return "bool"
        raise mismatch
    if (op, left, right) in _TIME:  # timestamp + duration, timestamp - timestamp, ...
        return _TIME[op, left, right]
    if base(left) != base(right):
        raise mismatch
    kind = base(left)
    if op == "+" and kind in ("int", "uint", "double", "string", "bytes", "list"):  # (duration + duration: above)
        joined = strict.unify(left, right)
        if joined is None:  # list(A) + list(A)
            raise mismatch
        return left if show(left) == show(right) or kind != "list" else joined
    if op in ("-", "*", "/") and kind in _NUMERIC:
        return left
    if op == "%" and kind in ("int", "uint"):
        return left
    raise mismatch
