"""Paths from a free variable that a program reads more than once, kept in a local from their first success (a
mixin of cel/compiler.py's generator).

Why: rules guard and then read the same fields (`has(container.resources) && has(container.resources.limits) &&
... container.resources.limits ...`), and each read walked the path again from `A['container']`, one dict test and
lookup per step: a PyTorchJob's evaluation spent about a sixth of its generated code on such steps. Here a path
prefix (`container.resources`) that the program mentions twice or more, or inside a loop, gets a local of its own,
`_UNSET` when the program starts; each read tests it and walks (and keeps) the path only while it is unset, so the
walk runs once per program run whichever branch reads it first.

Sound because a path from a free variable is a pure function of the activation, which a program never changes
(values are never changed in place, cel/folding.py): once walked without error it has that value for the rest of
the run. A walk that fails keeps nothing, so the next read walks again and fails as the first did, where it is
read: an error absorbed by `&&` or `||` there stays absorbed, one raised stays raised. `variables` (computed on
demand, cel/named.py), the type names and comprehension or `cel.bind` variables are never kept.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Mapping

from webhook.cel import fastpaths
from webhook.cel.runtime import TYPES
from webhook.cel.tree import children

UNSET = object()  # `_UNSET` in generated code: a kept path not walked yet (no CEL value is this object)
_LOOPS = ("all", "exists", "exists_one", "existsOne", "map", "filter", "transformList", "transformMap")


def _chain(node: tuple) -> tuple[Any, list]:
    """(the node a chain of field selections and literal indexes starts from, its steps in order)."""
    steps: list = []
    while node[0] == "select" or (node[0] == "index" and node[2][0] == "lit" and type(node[2][1]) in (str, int)):
        steps.append(node[2] if node[0] == "select" else node[2][1])
        node = node[1]
    steps.reverse()
    return node, steps


def worth_keeping(tree: tuple, inline: Mapping[str, str], variable_tree: Callable[[str], tuple]) -> frozenset:
    """The path prefixes (root name, steps) `tree`'s program may walk more than once (each mention counted once,
    twice inside a loop; each inlined variable's tree, computed in place by cel/named.py, with the rest), less
    those walked only on the way to one longer prefix (kept itself, it keeps them walked: `c.a` of two `c.a.b`)."""
    found: Counter = Counter()
    seen: set = set()
    stack: list = [(tree, frozenset(), 1)]
    while stack:
        node, scope, weight = stack.pop()
        kind = node[0]
        if kind == "call" and node[1] == "has" and node[2] is None and len(node[3]) == 1 \
                and node[3][0][0] == "select":
            stack.append((node[3][0][1], scope, weight))  # has(x.f) walks x
            continue
        root, steps = _chain(node) if kind in ("select", "index") else (node, [])
        if steps:
            if root[0] != "ident":
                stack.append((root, scope, weight))
            elif root[1] == "variables" and "variables" not in scope:
                name = steps[0]
                if type(name) is str and name in inline and name not in seen:
                    seen.add(name)
                    stack.append((variable_tree(inline[name]), frozenset(), weight))
            elif root[1] not in scope:
                for length in range(1, len(steps) + 1):
                    found[(root[1], tuple(steps[:length]))] += weight
            continue
        if kind == "call" and node[2] is not None and node[1] in _LOOPS and node[3] and node[3][0][0] == "ident":
            names = {arg[1] for arg in node[3][:2] if arg[0] == "ident"} if len(node[3]) > 2 else {node[3][0][1]}
            inner = scope | names
            stack.append((node[2], scope, weight))
            stack.extend((arg, inner, 2) for arg in node[3])
            continue
        if kind == "call" and node[1] == "cel.bind" and node[2] is None and len(node[3]) == 3 \
                and node[3][0][0] == "ident":
            stack.append((node[3][1], scope, weight))
            stack.append((node[3][2], scope | {node[3][0][1]}, weight))
            continue
        stack.extend((child, scope, weight) for child in children(node))
    longest: Counter = Counter()  # prefix -> the count of its most walked one-step extension
    for (name, steps), count in found.items():
        if len(steps) > 1:
            key = (name, steps[:-1])
            longest[key] = max(longest[key], count)
    return frozenset(key for key, count in found.items() if count >= 2 and count > longest[key])


class PathMemo:
    """`kept_path`, for the generator, which provides `name` and `_ident`, and sets `kept` (`worth_keeping`) and
    `memos` (path prefix -> its local, the locals the program sets to `_UNSET` first: cel/compiler.py `generate`)."""

    _IN = "    "

    def kept_path(self, root: tuple, steps: list, scope: dict, out: list, indent: str) -> Any:
        """The local holding `root.steps...` when a prefix of it is kept, having written the code that walks what
        is not walked yet; None when no prefix is kept (the caller walks it as ever)."""
        if root[0] != "ident" or root[1] in scope or root[1] in TYPES or root[1] == "variables":
            return None
        name = root[1]
        kept = [length for length in range(1, len(steps) + 1) if (name, tuple(steps[:length])) in self.kept]
        if not kept:
            return None
        local = self._fill(name, steps, kept, len(kept) - 1, out, indent)
        for step in steps[kept[-1]:]:  # the rest of the path, walked as ever
            walked = self.name()
            out.append(f"{indent}{walked} = {fastpaths.step(local, step)}")
            local = walked
        return local

    def _fill(self, name: str, steps: list, kept: list, at: int, out: list, indent: str) -> str:
        """Code making sure the kept prefix `kept[at]` is walked; its local."""
        length = kept[at]
        key = (name, tuple(steps[:length]))
        memo = self.memos.get(key)
        if memo is None:
            memo = self.memos[key] = self.name("p")
        inner = indent + self._IN
        out.append(f"{indent}if {memo} is _UNSET:")
        if at:
            source, start = self._fill(name, steps, kept, at - 1, out, inner), kept[at - 1]
        else:
            source, start = self._ident(("ident", name), out, inner, {}), 0
        if not source.isidentifier():  # `A['name']`: into a local, mentioned twice by a step
            local = self.name()
            out.append(f"{inner}{local} = {source}")
            source = local
        for step in steps[start:length - 1]:
            local = self.name()
            out.append(f"{inner}{local} = {fastpaths.step(source, step)}")
            source = local
        out.append(f"{inner}{memo} = {fastpaths.step(source, steps[length - 1])}")
        return memo
