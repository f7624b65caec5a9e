"""The small part of JSON Schema that built-in `schema:` rules use, evaluated without importing jsonschema.

A rule such as "hostNetwork is not true" or "capabilities.add is empty" is
exactly a JSON Schema, and the built-in policies say so with `schema:`. But
importing `jsonschema` costs 0.15-0.2 s of every `aiadmit audit` and
pre-commit run (the bundle otherwise loads without it: policies/checked.json),
and its `iter_errors` is tens of microseconds per call. The keywords below are
evaluated here, in Python, with the messages and the error order of jsonschema
(4.x) and its equality (a boolean is not a number); a schema with any other
keyword, or with a value these keywords do not accept, returns None from
`compile_schema` and goes to jsonschema as before (schemarule.py), which also
checks it against the meta-schema. tests/test_schemanative.py compares both.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

KEYWORDS = frozenset({"properties", "not", "const", "type", "maxItems", "minItems", "enum"})
_TYPES = {
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}

Check = Callable[[Any, tuple], Iterator[tuple[list, str]]]


def equal(one: Any, two: Any) -> bool:
    """JSON equality as JSON Schema's `const` and `enum` use it: true is not 1, 1 is 1.0."""
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    if isinstance(one, list) or isinstance(two, list):
        return (isinstance(one, list) and isinstance(two, list) and len(one) == len(two)
                and all(equal(a, b) for a, b in zip(one, two)))
    if isinstance(one, dict) or isinstance(two, dict):
        return (isinstance(one, dict) and isinstance(two, dict) and one.keys() == two.keys()
                and all(equal(one[k], two[k]) for k in one))
    return one == two


def compile_schema(schema: Any) -> Optional[Check]:
    """A function yielding (path tokens, message) for each violation, or None when jsonschema must do it."""
    if schema is True:
        return lambda instance, path: iter(())
    if not isinstance(schema, dict) or not schema.keys() <= KEYWORDS:
        return None
    parts: list[Check] = []
    for keyword, value in schema.items():
        part = _keyword(keyword, value)
        if part is None:
            return None
        parts.append(part)

    def check(instance: Any, path: tuple) -> Iterator[tuple[list, str]]:
        for part in parts:
            yield from part(instance, path)
    return check


def _keyword(keyword: str, value: Any) -> Optional[Check]:
    if keyword == "properties":
        if not isinstance(value, dict):
            return None
        children = {name: compile_schema(sub) for name, sub in value.items()}
        if any(child is None for child in children.values()):
            return None

        def properties(instance, path):
            if isinstance(instance, dict):
                for name, child in children.items():
                    if name in instance:
                        yield from child(instance[name], path + (name,))
        return properties
    if keyword == "not":
        inner = compile_schema(value)
        if inner is None:
            return None

        def not_(instance, path):
            if next(inner(instance, path), None) is None:
                yield list(path), f"{instance!r} should not be valid under {value!r}"
        return not_
    if keyword == "const":
        def const(instance, path):
            if not equal(instance, value):
                yield list(path), f"{value!r} was expected"
        return const
    if keyword == "enum":
        if not isinstance(value, list):
            return None

        def enum(instance, path):
            if not any(equal(instance, item) for item in value):
                yield list(path), f"{instance!r} is not one of {value!r}"
        return enum
    if keyword == "type":
        names = value if isinstance(value, list) else [value]
        if not names or not all(isinstance(n, str) and n in _TYPES for n in names):
            return None
        tests = [_TYPES[n] for n in names]
        shown = ", ".join(repr(n) for n in names)

        def type_(instance, path):
            if not any(test(instance) for test in tests):
                yield list(path), f"{instance!r} is not of type {shown}"
        return type_
    if keyword in ("maxItems", "minItems"):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return None
        if keyword == "maxItems":
            words = "is expected to be empty" if value == 0 else "is too long"

            def max_items(instance, path):
                if isinstance(instance, list) and len(instance) > value:
                    yield list(path), f"{instance!r} {words}"
            return max_items
        words = "should be non-empty" if value == 1 else "is too short"

        def min_items(instance, path):
            if isinstance(instance, list) and len(instance) < value:
                yield list(path), f"{instance!r} {words}"
        return min_items
    return None


class NativeSchemaRule:
    """A `schema:` rule made of KEYWORDS only: what language/schemarule.SchemaRule does, without jsonschema."""

    __slots__ = ("check", "schema")

    def __init__(self, check: Check, schema: Any):
        self.check = check
        self.schema = schema  # what a pickled bundle keeps (language/bundlecache.py): the check is a closure

    def __reduce__(self):
        return _recompiled, (self.schema,)

    def errors(self, instance: Any) -> Iterator[tuple[list, str]]:
        return self.check(instance, ())


def _recompiled(schema: Any) -> NativeSchemaRule:
    """A kept rule's check compiled again from its schema (language/bundlecache.py)."""
    check = compile_schema(schema)
    if check is None:
        raise ValueError("a kept schema rule that no longer compiles natively")
    return NativeSchemaRule(check, schema)
