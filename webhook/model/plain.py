"""Plain data classes, as `dataclasses.dataclass` makes them, for a fraction of its cost at import.

Why: a one-file `aiadmit audit` (the pre-commit hook's run) imports two dozen data classes. The standard
decorator builds each one with four to six generated functions, each compiled from source, after importing
`dataclasses` and `inspect`: about 14 ms of CPU per process, a sixth of the whole run (bench/RESULTS.md,
bench/startup.py). Here only `__init__` is generated (it runs per object, so it must be as fast as the standard
one); `__repr__`, `__eq__`, `__hash__` and the frozen `__setattr__` are shared functions reading the class's
field list, and run only when someone prints, compares or hashes.

What it keeps of the standard behaviour, for the subset aiadmit uses (tests/test_plain.py compares it with the
standard decorator): fields in annotation order, inherited fields first; `field(default=..., default_factory=...,
init=..., repr=..., compare=...)`; a default that is a list, dict or set is refused; a field without a default
after one with a default is refused; `__post_init__`; `frozen=True` (assigning raises FrozenInstanceError, an
AttributeError; the instance hashes by its compared fields); a mutable class compares by its fields and is not
hashable; methods written in the class body are kept. Not offered: `dataclasses.fields`, `asdict`, `replace`
(nothing in aiadmit uses them), `order`, `slots`, `kw_only`, `InitVar`.
"""

from __future__ import annotations

from typing import Any, Optional

MISSING: Any = type("MISSING", (), {"__repr__": lambda self: "MISSING"})()
_FACTORY: Any = type("FACTORY", (), {"__repr__": lambda self: "<factory>"})()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen instance."""


class Field:
    __slots__ = ("name", "default", "default_factory", "init", "repr", "compare")

    def __init__(self, default: Any, default_factory: Any, init: bool, repr: bool, compare: bool):
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.compare = init, repr, compare


def field(*, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True, repr: bool = True,
          compare: bool = True) -> Any:
    return Field(default, default_factory, init, repr, compare)


def _repr(self) -> str:
    return f"{self.__class__.__qualname__}(" + ", ".join(
        f"{name}={getattr(self, name)!r}" for name in self.__class__.__plain_repr__) + ")"


def _eq(self, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = self.__class__.__plain_compare__  # compared as tuples, as the standard decorator does
    return tuple(getattr(self, name) for name in names) == tuple(getattr(other, name) for name in names)


def _hash(self) -> int:
    return hash(tuple(getattr(self, name) for name in self.__class__.__plain_compare__))


def _frozen_setattr(self, name: str, value: Any) -> None:
    if type(self) is self.__plain_class__ or name in self.__plain_fields__:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _frozen_delattr(self, name: str) -> None:
    if type(self) is self.__plain_class__ or name in self.__plain_fields__:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


def _fields(cls: type) -> list[Field]:
    """Inherited fields first (a base's field redefined keeps its place), then the class's own, in order."""
    found: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for inherited in getattr(base, "__plain_field_list__", ()):
            found[inherited.name] = inherited
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if isinstance(annotation, str) and annotation.replace("typing.", "").startswith("ClassVar"):
            continue
        value = cls.__dict__.get(name, MISSING)
        spec = value if isinstance(value, Field) else Field(value, MISSING, True, True, True)
        spec.name = name
        default = spec.default
        if default is not MISSING and type(default).__hash__ is None:
            raise ValueError(f"mutable default {type(default)} for field {name} is not allowed: use default_factory")
        if isinstance(value, Field):  # the class attribute becomes the default, or goes
            if default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, default)
        found.pop(name, None)
        found[name] = spec
    return list(found.values())


def _init_source(cls: type, fields: list[Field], frozen: bool, namespace: dict) -> str:
    parameters, body, seen_default = [], [], False
    for spec in fields:
        value = spec.name
        if spec.init:
            if spec.default is not MISSING:
                namespace[f"_d_{spec.name}"] = spec.default
                parameters.append(f"{spec.name}=_d_{spec.name}")
                seen_default = True
            elif spec.default_factory is not MISSING:
                namespace[f"_f_{spec.name}"] = spec.default_factory
                parameters.append(f"{spec.name}=_FACTORY")
                value = f"_f_{spec.name}() if {spec.name} is _FACTORY else {spec.name}"
                seen_default = True
            elif seen_default:
                raise TypeError(f"non-default argument {spec.name!r} follows default argument")
            else:
                parameters.append(spec.name)
        elif spec.default is not MISSING:
            namespace[f"_d_{spec.name}"] = spec.default
            value = f"_d_{spec.name}"
        elif spec.default_factory is not MISSING:
            namespace[f"_f_{spec.name}"] = spec.default_factory
            value = f"_f_{spec.name}()"
        else:
            continue  # neither passed nor defaulted: left unset, as the standard decorator does
        body.append(f"    _setattr(self, {spec.name!r}, {value})" if frozen else f"    self.{spec.name} = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    return f"def __init__(self, {', '.join(parameters)}):\n" + "\n".join(body or ["    pass"]) + "\n"


def _make(cls: type, frozen: bool) -> type:
    fields = _fields(cls)
    own = cls.__dict__
    cls.__plain_field_list__ = tuple(fields)
    cls.__plain_fields__ = frozenset(spec.name for spec in fields)
    cls.__plain_repr__ = tuple(spec.name for spec in fields if spec.repr)
    cls.__plain_compare__ = tuple(spec.name for spec in fields if spec.compare)
    cls.__plain_class__ = cls
    if "__init__" not in own:
        namespace = {"_FACTORY": _FACTORY, "_setattr": object.__setattr__}
        exec(compile(_init_source(cls, fields, frozen, namespace), f"<plain {cls.__qualname__}>", "exec"), namespace)
        init = namespace["__init__"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = init
    if "__repr__" not in own:
        cls.__repr__ = _repr
    if "__eq__" not in own:
        cls.__eq__ = _eq
    if "__hash__" not in own or own["__hash__"] is None:  # a class body with __eq__ only has __hash__ None
        cls.__hash__ = _hash if frozen else None
    if frozen:
        if "__setattr__" in own or "__delattr__" in own:
            raise TypeError(f"cannot overwrite attribute __setattr__ or __delattr__ in class {cls.__name__}")
        cls.__setattr__ = _frozen_setattr
        cls.__delattr__ = _frozen_delattr
    return cls


def dataclass(cls: Optional[type] = None, *, frozen: bool = False) -> Any:
    """`@dataclass` or `@dataclass(frozen=True)`: see the module's docstring for what is kept."""
    def wrap(target: type) -> type:
        return _make(target, frozen)
    return wrap(cls) if cls is not None else wrap


__all__ = ["dataclass", "field", "FrozenInstanceError", "MISSING", "Field"]
