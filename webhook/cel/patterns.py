"""Patterns checked at load: a regex argument that is a literal, a param, or an element of a param list.

Why: a pattern RE2 rejects (look-behind, back-references) would otherwise fail at run time on every review, at the
manifest's line instead of the author's. A param is a constant once the config is loaded, so it is checked as the
literal it becomes; a comprehension over a param list (`params.patterns.exists(p, x.matches(p))`) feeds each element.
The checker (cel/checker.py) turns the problem into its CheckError; a param's problem is reported at the param's own
value (language/compiler.py).
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional


def pattern_problem(argument: tuple, scope: Mapping, param_values: Mapping, param_lists: Mapping,
                    check_pattern: Callable[[str], None]) -> Optional[tuple[str, Optional[tuple]]]:
    """(message, the param's path or None) for the first pattern of `argument` that RE2 refuses, else None."""
    if argument[0] == "lit" and type(argument[1]) is str:
        candidates = [(argument[1], None, "")]
    elif argument[0] == "select" and argument[1] == ("ident", "params") and "params" not in scope \
            and type(param_values.get(argument[2])) is str:
        candidates = [(param_values[argument[2]], (argument[2],), f"param {argument[2]}: ")]
    elif argument[0] == "ident" and param_lists.get(argument[1]) is not None:
        listed = param_lists[argument[1]]
        candidates = [(value, (listed, index), f"param {listed}[{index}]: ")
                      for index, value in enumerate(param_values[listed]) if type(value) is str]
    else:
        return None
    for value, param, prefix in candidates:
        try:
            check_pattern(value)
        except Exception as exc:  # what RE2 rejects fails the load
            return f"{prefix}{exc}", param
    return None
