"""Constant folding before compilation: literal lists and maps (the inlined params) become values built once."""

from __future__ import annotations


def fold(node: tuple) -> tuple:
    """Constant list and map literals (the inlined params) become values built once, not at every run.

    Safe because evaluation never changes a value in place: comprehensions
    build new lists, and the engine copies a mutation's value before patching.
    """
    kind = node[0]
    if kind == "list":
        items = tuple(fold(item) for item in node[1])
        if all(item[0] == "lit" for item in items):
            return ("lit", [item[1] for item in items])
        return ("list", items)
    if kind == "map":
        entries = tuple((fold(k), fold(v)) for k, v in node[1])
        if all(k[0] == "lit" and v[0] == "lit" for k, v in entries):
            keys = [k[1] for k, _ in entries]
            if all(type(k) is str for k in keys) and len(set(keys)) == len(keys):
                return ("lit", {k[1]: v[1] for k, v in entries})
        return ("map", entries)
    if kind == "select":
        operand = fold(node[1])
        if operand[0] == "lit" and type(operand[1]) is dict and node[2] in operand[1]:
            return ("lit", operand[1][node[2]])
        return ("select", operand, node[2])
    if kind == "index":
        operand, key = fold(node[1]), fold(node[2])
        if operand[0] == "lit" and type(operand[1]) is dict and key[0] == "lit" and type(key[1]) is str \
                and key[1] in operand[1]:
            return ("lit", operand[1][key[1]])
        return ("index", operand, key)
    if kind == "call":
        if node[1] == "has" and node[2] is None and len(node[3]) == 1 and node[3][0][0] == "select":
            field = node[3][0]  # has() keeps its selection: only the operand is folded
            return ("call", "has", None, (("select", fold(field[1]), field[2]),))
        return ("call", node[1], None if node[2] is None else fold(node[2]), tuple(fold(a) for a in node[3]))
    if kind in ("not", "neg"):
        return (kind, fold(node[1]))
    if kind == "binary":
        return ("binary", node[1], fold(node[2]), fold(node[3]))
    if kind in ("and", "or"):
        return (kind, tuple(fold(n) for n in node[1]))
    if kind == "cond":
        return ("cond", fold(node[1]), fold(node[2]), fold(node[3]))
    if kind == "struct":
        return ("struct", node[1], tuple((name, fold(value), optional) for name, value, optional in node[2]))
    return node
