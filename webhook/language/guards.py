"""The conjuncts of a rule's `when` that the engine can decide in Python before any CEL runs (engine/planning.py).

Two forms, each a top-level `&&` operand of the `when`:

- `has(container.a.b)` (cel/environment.py's `required_presence`): the field is there, exactly as CEL's has()
  sees it; checked as `(variable, path)`.
- `container.a.b.exists(v, has(v.f))`: some element of the list holds `f`; checked as `(variable, path, f)`. In
  Python it is only ever found *false* when CEL would find it false without an error: the path is there, it is a
  list, and every element is a map without `f`. Anything else (the path absent, not a list, an element that is no
  map) leaves the rule to CEL, which answers or reports its error as before.

A conjunct `variables.NAME` stands for the guards of that named variable's own expression (its top-level `&&`
operands, recursively): the variable is true only where they hold, and a false operand makes CEL's `&&` false
whatever the others do, errors included. So a rule such as image-digest's image-volume rules (`when:
variables.hasImageVolumes`), false for every pod that mounts no image volume, costs a pod with ordinary volumes no
CEL, no binding and no call: the same findings, fewer instructions.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional

from webhook.cel.environment import conjuncts, presence_in

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_EXISTS_HAS = re.compile(
    rf"^(container|pod|podMeta|object)((?:\s*\.\s*{_NAME})+)\s*\.\s*exists\(\s*({_NAME})\s*,"
    rf"\s*has\(\s*\3\s*\.\s*({_NAME})\s*\)\s*\)$")


_VARIABLE = re.compile(rf"^variables\s*\.\s*({_NAME})$")


def python_guards(source: str, named: Optional[Mapping[str, str]] = None) -> tuple:
    """The (variable, path) has() guards of `source`, its (variable, path, field) exists-has() guards, and those of
    the named variables (`named`: name -> source, the policy's `variables`) that it requires as a whole conjunct."""
    found: dict = {}
    _collect(source, named or {}, found, set())
    return tuple(found)


def _collect(source: str, named: Mapping[str, str], found: dict, seen: set) -> None:
    parts = conjuncts(source)  # split once for both forms: each load splits every `when` (a character loop)
    for guard in presence_in(parts):
        found[guard] = None
    for part in parts:
        exists = _EXISTS_HAS.match(part)
        if exists:
            path = tuple(token.strip() for token in exists.group(2).split(".") if token.strip())
            found[(exists.group(1), path, exists.group(4))] = None
            continue
        variable = _VARIABLE.match(part)
        if variable and variable.group(1) in named and variable.group(1) not in seen:
            seen.add(variable.group(1))  # a variable reads only earlier ones; the set only bounds a bad document
            _collect(named[variable.group(1)], named, found, seen)
