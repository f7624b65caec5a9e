"""The message types of a MutatingAdmissionPolicy's CEL: `JSONPatch{op:, path:, from:, value:}` and `Object{...}`.

Why its own module: the checker, the compiler and the MAP runner must agree on what these types are, and nothing
else in aiadmit's CEL constructs messages. As Kubernetes declares them (k8s.io/apiserver/pkg/cel/mutation,
v1.37.2): `JSONPatch` has the string fields `op`, `path`, `from` and the dyn `value`; `Object` and every dotted
name under it (`Object.spec`, `Object.spec.containers`) is an open object type whose fields are all dyn. They are
declared only where a mutation is compiled (`MESSAGES` in the declarations; language/mapload.py): anywhere else
`JSONPatch{...}` names an undeclared type, as in the API server.

At run time a constructed message is a `Message`, a dict that remembers its type name, so field selection,
`has()` and JSON conversion work on it as on any map, and the MAP runner can check that nested `Object.*` names
follow their field path (`Object{spec: Object.foo{}}` is the API server's `type mismatch` error).
"""

from __future__ import annotations

from typing import Any, Optional

from webhook.cel.constants import DYN
from webhook.cel.values import NONE, EvalError, Optional as CelOptional

MESSAGES = "@messages"  # the declaration that enables them: never a name CEL source can spell
JSONPATCH, OBJECT = "JSONPatch", "Object"
_STRING_FIELDS = ("op", "path", "from")
JSONPATCH_FIELDS = {"op": "string", "path": "string", "from": "string", "value": DYN}


def type_text(kind: Any) -> str:
    """A checker type as cel-go writes it: list(int), map(string, dyn), Object.spec."""
    if isinstance(kind, tuple):
        return f"{kind[0]}({', '.join(type_text(k) for k in kind[1:])})"
    return str(kind)


def is_object_type(name: str) -> bool:
    return name == OBJECT or name.startswith(OBJECT + ".")


def check(checker: Any, node: tuple, scope: Any, Struct: type) -> Any:  # noqa: N803 - the checker's class
    """The checker's type of `TypeName{...}` (cel/checker.py): a declared message type, its fields' types checked
    (JSONPatch's are closed: `JSONPatch{foo: 1}` is an error, as `undefined field`), the values checked in any case."""
    _, name, fields = node
    declared = MESSAGES in checker.declarations
    if declared and name == JSONPATCH:
        kind = Struct(JSONPATCH, JSONPATCH_FIELDS)
    elif declared and is_object_type(name):
        kind = Struct(name, {}, open=True)
    else:
        raise checker.fail(node, f"undeclared reference to {name!r}: messages are constructed only in a "
                                 f"MutatingAdmissionPolicy's mutations (JSONPatch, Object)")
    for field, value, optional in fields:
        found = checker.check(value, scope)
        want = "optional" if optional else kind.fields.get(field, DYN if kind.open else "")
        if want != DYN and found not in (DYN, want):  # cel-go's words; an unknown field's type is ''
            raise checker.fail(value, f"expected type of field {field!r} is '{want}' but provided type is "
                                      f"'{type_text(found)}'")
    return kind


def join(checker: Any, node: tuple, a: Any, b: Any) -> Any:
    """The type of `c ? a : b` whose branches differ: dyn, except in a mutation, where cel-go's free element type
    of an empty literal takes the other branch's (`c ? [JSONPatch{...}] : []` is a list(JSONPatch), as the API
    server accepts it; aiadmit's policies keep the checker's dyn)."""
    if MESSAGES in checker.declarations:
        if node[2][0] in ("list", "map") and node[2][1] == ():
            return b
        if node[3][0] in ("list", "map") and node[3][1] == ():
            return a
    return DYN


class Message(dict):
    """A constructed message: its fields as a dict, and its type name."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str, fields: dict):
        super().__init__(fields)
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"{self.type_name}{dict.__repr__(self)}"


def build(type_name: str, fields: dict, optional: tuple = ()) -> Message:
    """The message, with the run-time checks Kubernetes' JSONPatch type makes (a non-string `op` from a dyn).
    `optional`: the fields written `?field:`, whose value is an optional: set only when it holds one."""
    for name in optional:
        value = fields.pop(name)
        if type(value) is not CelOptional:
            raise EvalError(f"field {name!r}: `?` takes an optional")
        if value is not NONE:
            fields[name] = value.value
    if type_name == JSONPATCH:
        for name in _STRING_FIELDS:
            if name in fields and not isinstance(fields[name], str):
                raise EvalError(f"unexpected type {type(fields[name]).__name__} for JSONPatchType {name!r} field")
    return Message(type_name, fields)


def type_mismatches(value: Any, path: Optional[list] = None) -> list[str]:
    """Each nested `Object.*` whose type name is not its field path from the root Object (the API server's
    CheckTypeNamesMatchFieldPathNames, run on every apply configuration and JSONPatch value)."""
    if isinstance(value, Message) and is_object_type(value.type_name):
        path = path or [value.type_name]
        found = []
        expected = ".".join(path)
        if value.type_name != expected:
            found.append(f'unexpected type name "{value.type_name}", expected "{expected}", which matches field '
                         f'name path from root Object type')
        for key, item in value.items():
            found += type_mismatches(item, path + [key])
        return found
    if path is None:
        return []
    if isinstance(value, list):
        return [problem for item in value for problem in type_mismatches(item, path)]
    if isinstance(value, dict):
        return [problem for item in value.values() for problem in type_mismatches(item, path)]
    return []


def to_json(value: Any) -> Any:
    """A CEL value as the JSON the API server writes of it: messages and maps as objects, lists as arrays."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise EvalError(f"map key {key!r} is of type {type(key).__name__}, not string")
            out[key] = to_json(item)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value
    raise EvalError(f"a {type(value).__name__} cannot be written as JSON")


class Construction:
    """The native compiler's `TypeName{...}` (cel/compiler.py mixes this in): a call of `build` with the fields."""

    def _struct(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        _, name, fields = node
        values = [(field, self.atom(value, out, indent, scope)) for field, value, _ in fields]
        optional = tuple(field for field, _, flag in fields if flag)
        entries = ", ".join(f"{field!r}: {value}" for field, value in values)
        return f"{self.constant(build)}({name!r}, {{{entries}}}, {optional!r})"
