"""Walking parsed trees (cel/parser.py): the children of a node, the depth of a tree, qualified-name resolution.

Why its own module: the checker, the cost estimate and the compiler walk the same trees, and must resolve a
dotted name the same way. Qualified names (the spec's "Name Resolution"): `a.b.c` is the variable `a.b.c` if one is declared, else the field `c` of a declared `a.b`,
else the fields `b.c` of `a` (longest prefix first). A comprehension variable shadows: `a.b` over a local `a` is a
field selection. Only tried when some declared name has a dot, so an ordinary expression pays one test per selection.
"""

from __future__ import annotations

from typing import Collection, Mapping, Optional


def resolve(node: tuple, scope: Mapping, qualified: Collection[str]) -> Optional[tuple[str, list]]:
    """(the longest declared dotted name `node` begins with, the selection nodes above it, innermost first),
    or None when `node` is no selection chain from a free identifier or no dotted name matches."""
    chain = [node]  # chain[j] selects the first len(names) - j names
    while chain[-1][0] == "select":
        chain.append(chain[-1][1])
    root = chain.pop()
    if root[0] != "ident" or root[1] in scope:
        return None
    names = [root[1]] + [step[2] for step in reversed(chain)]
    for length in range(len(names), 1, -1):
        name = ".".join(names[:length])
        if name in qualified:
            return name, list(reversed(chain[:len(names) - length]))
    return None


def depth(tree: tuple) -> int:
    """The nesting depth of a tree, without recursion (a 15,000-term `+` chain must not overflow the stack)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        for child in children(node):
            stack.append((child, level + 1))
    return deepest


def children(node: tuple) -> list:
    kind = node[0]
    if kind in ("lit", "ident"):
        return []
    if kind in ("select", "optselect", "not", "neg", "optitem"):
        return [node[1]]
    if kind in ("index", "optindex"):
        return [node[1], node[2]]
    if kind == "binary":
        return [node[2], node[3]]
    if kind in ("and", "or", "list"):
        return list(node[1])
    if kind == "map":
        return [part for entry in node[1] for part in entry]
    if kind == "cond":
        return [node[1], node[2], node[3]]
    if kind == "struct":
        return [value for _, value, _ in node[2]]
    if kind == "call":
        return ([node[2]] if node[2] is not None else []) + list(node[3])
    return []
