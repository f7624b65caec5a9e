"""Value classes written out by hand: `Frozen`, and `replace`/`astuple` for them, as the dataclasses module had them.

These classes were dataclasses. Generating a dataclass's methods (the source of each `__init__`, `__eq__`,
`__hash__` and frozen `__setattr__`, compiled by `exec`) and importing `dataclasses` with `inspect` cost every
process that imports them, the pre-commit hook's one-file audit most of all (bench/RESULTS.md, h-imports). Each
class now has its `__init__` in its module (and, where values are compared or hashed, the fields `Compared` reads), and
its fields are its `__init__`'s parameters, in order: what `replace` and `astuple` read.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


class Frozen:
    """Refuses assignment and deletion of attributes, as a frozen dataclass does (the same message).

    For the shared tables (the kinds table, the CEL library, the versions, a config's classification and limits):
    every request and thread reads them, so an assignment would change every evaluation after it. `__init__` sets
    the fields with `object.__setattr__`, which this class does not intercept."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")


class Compared:
    """Equal to a value of the same class with the same `_compared()` tuple, and hashed by it, as a dataclass's
    generated `__eq__`/`__hash__` were over its compared fields. A mutable class sets `__hash__ = None`."""

    __slots__ = ()

    def _compared(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._compared() == other._compared()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._compared())


def field_names(cls: type) -> tuple[str, ...]:
    """The fields of a value class: its `__init__`'s parameters after `self`, in order."""
    code = cls.__init__.__code__  # type: ignore[misc]
    return code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]


def replace(value: T, **changes: Any) -> T:
    """A copy of `value` with `changes` applied, made by its class's `__init__` (and so its `__post_init__`, if any)
    from every field: what `dataclasses.replace` made. A name that is not a field is a TypeError."""
    names = field_names(type(value))
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field {unknown[0]!r}")
    return type(value)(**{name: changes[name] if name in changes else getattr(value, name) for name in names})


def astuple(value: Any) -> tuple:
    """The values of `value`'s fields, in order (`dataclasses.astuple` for fields that hold no value class)."""
    return tuple(getattr(value, name) for name in field_names(type(value)))
