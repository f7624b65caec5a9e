"""The checker's names for types (a declared variable's `Struct` among them), and the type of a constant.

Why a module of its own: the checker (cel/checker.py) and what checks with it need
the same spelling of a type (`show`) and the same reading of a constant, and the
checker itself stays one walk of the tree. A checked expression keeps its type, so a
loaded bundle kept whole (language/bundlecache.py) holds `Struct`s: reading it back
imports this module, not the checker.
"""

from __future__ import annotations

from typing import Any, Mapping

from webhook.cel.values import UInt

DYN = "dyn"
WHOLE = "*"  # in the checker's `named`: `variables` read whole (passed on, indexed by a computed key), so every one


class Struct:
    """A declared variable with known fields (aiadmit's `workload`, `cluster`, ...): a misspelt field is an error.

    `fields` maps a field name to its type; `open` structs accept any other field as dyn."""

    __slots__ = ("name", "fields", "open")

    def __init__(self, name: str, fields: Mapping[str, Any], open: bool = False):
        self.name, self.fields, self.open = name, dict(fields), open

    def __repr__(self) -> str:
        return self.name


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
