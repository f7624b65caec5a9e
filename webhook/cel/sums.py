"""The zero an empty list sums to, by the list's static type: what the compiler writes for each `sum()` call.

Why: Kubernetes types `[1.5].filter(x, x > 9.0).sum()` when it compiles it and gives 0.0 for an empty list of
doubles, 0u for one of uints (0 for ints and for a list it cannot type, `[].sum()`). At run time an empty list has
no element to tell, so the compiler asks the checker (cel/checker.py) for the element type at each sum() call: run
leniently (every free name dyn: the source was already checked with its declarations), reading a policy variable
that is computed in place (`variables.NAME`, cel/compiler.py inline) through its own tree. It runs once per
program that has a sum() call, when the program is compiled; evaluation pays nothing.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from webhook.cel.checker import Checker, CheckError
from webhook.cel.library import FUNCTIONS
from webhook.cel.values import UInt

_ZEROS = {"double": 0.0, "uint": UInt(0)}


class _Typing(Checker):
    """The checker, noting the element type at each sum() call (by node), `variables.NAME` (or `variables["NAME"]`)
    read through its tree."""

    def __init__(self, inline: Mapping[str, str], tree_of: Callable[[str], tuple]):
        super().__init__({}, {}, FUNCTIONS, lenient=True)
        self.inline, self.tree_of, self.zeros = inline, tree_of, {}

    def _select(self, node: tuple, scope: Mapping) -> Any:
        if node[1] == ("ident", "variables") and "variables" not in scope and node[2] in self.inline:
            return self.check(self.tree_of(self.inline[node[2]]))
        return super()._select(node, scope)

    def _index(self, node: tuple, scope: Mapping) -> Any:
        key = node[2]
        if node[1] == ("ident", "variables") and "variables" not in scope and key[0] == "lit" and \
                type(key[1]) is str and key[1] in self.inline:
            return self.check(self.tree_of(self.inline[key[1]]))
        return super()._index(node, scope)

    def _call(self, node: tuple, scope: Mapping) -> Any:
        kind = super()._call(node, scope)
        if node[1] == "sum" and kind in _ZEROS:  # the checker types a sum() as its list's element type
            self.zeros[id(node)] = _ZEROS[kind]
        return kind


def zeros(tree: tuple, inline: Mapping[str, str], tree_of: Callable[[str], tuple]) -> dict:
    """id(sum() call node) -> the zero of its list's element type, where that is double or uint."""
    typing = _Typing(inline, tree_of)
    try:
        typing.check(tree)
    except (CheckError, RecursionError):  # checked at load already; a sum() left untyped sums an empty list to 0
        pass
    return typing.zeros


def typed_sum(function: Callable[[Any], Any], zero: Any) -> Callable[[Any], Any]:
    """`function` (the library's sum), giving `zero` for an empty list."""
    def summed(items: Any) -> Any:
        if type(items) is list and not items:
            return zero
        return function(items)
    return summed
