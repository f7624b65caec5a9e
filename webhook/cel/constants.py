"""The checker's names for types, and the type of a constant (a parameter's value, a literal).

Why a module of its own: the checker (cel/checker.py) and what checks with it need
the same spelling of a type (`show`) and the same reading of a constant, and the
checker itself stays one walk of the tree.
"""

from __future__ import annotations

from typing import Any

from webhook.cel.parser import UInt

DYN = "dyn"


def show(kind: Any) -> str:
    if isinstance(kind, tuple):
        return f"{kind[0]}({', '.join(show(k) for k in kind[1:])})"
    return str(kind)


def type_of_value(value: Any) -> Any:
    """The type of a constant (a parameter's value), as the checker sees it."""
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    if isinstance(value, UInt):
        return "uint"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        kinds = {show(type_of_value(v)): type_of_value(v) for v in value}
        return ("list", next(iter(kinds.values())) if len(kinds) == 1 else DYN)
    if isinstance(value, dict):
        return ("map", "string", DYN)
    return DYN
