"""What Kubernetes' CEL rejects at compile time beyond names and arities: cel-go's overload typing and the
AST validators of the ValidatingAdmissionPolicy environment.

Why: a rule that loads in aiadmit must compile in Kubernetes (or use a declared aiadmit extension,
docs/policy-language.md), so the checker (cel/checker.py) refuses what cel-go's checker and Kubernetes'
validators refuse (k8s.io/apiserver v0.37.2 pkg/cel/environment/base.go, cel-go v0.29; the same in v0.34.4):

- cel-go's checker: `==`, `!=`, `?:`, `in`, list `+` and the sets functions take one type twice (`(A, A)`,
  `(A, list(A))`), so `1 == 1.0`, `'a' in [1]` and `true ? 'a' : 1` do not compile (only `<` and friends
  compare across int, uint and double: CrossTypeNumericComparisons); conversions, size() and the timestamp
  accessors have fixed argument types (`int(true)`, `size(1)`, `1.getHours()`).
- Kubernetes' validators (`kubernetes=True`): list and map literals are homogeneous (`[1, 'a']`, `[x, 1]` with
  `x` dyn: "expected type 'int' but found 'string'"; literals inside a format() call are exempt), constant
  duration() and timestamp() arguments must be valid, and a constant format() string must fit its
  list-literal arguments (cel-go's strings extension validator).

Types are the checker's. `SURE_DYN` is a dyn cel-go also types dyn (a variable declared dyn, a field or index of
one, `dyn(x)`); the checker's plain DYN may also mean "not known here" (a function result it does not type), so
only a sure dyn counts as a type of its own in a literal, and nothing is rejected on a type the checker does not
know. Both compare equal to "dyn", so the rest of the checker need not tell them apart.
"""

from __future__ import annotations

from typing import Any, Optional

from webhook.cel.constants import DYN, show
from webhook.cel.timestamps import duration as _duration, timestamp as _timestamp


class _SureDyn(str):
    """`dyn` as a type cel-go infers too (equal to "dyn" everywhere else)."""

    __slots__ = ()


SURE_DYN = _SureDyn(DYN)
_PRIMITIVE = frozenset({"bool", "int", "uint", "double", "string", "bytes", "null", "type", "optional"})


def _struct(kind: Any) -> bool:
    return not isinstance(kind, (str, tuple))


def _head(kind: Any) -> Any:
    return kind[0] if isinstance(kind, tuple) else ("map" if _struct(kind) else kind)


def known(kind: Any) -> bool:
    """A type the checker knows as Kubernetes does: not a dyn, not an aiadmit struct (a dyn in Kubernetes)."""
    return kind != DYN and not _struct(kind)


def unify(a: Any, b: Any) -> Optional[Any]:
    """The type both `a` and `b` are, as cel-go unifies a type parameter used twice; None when there is none."""
    if a == DYN:
        return b
    if b == DYN:
        return a
    if _struct(a) or _struct(b):
        if _struct(a) and _struct(b):
            return a if a.name == b.name else None
        struct, other = (a, b) if _struct(a) else (b, a)
        return struct if other == "null" or (isinstance(other, tuple) and other[0] == "map") else None
    if "null" in (a, b):  # cel-go: null is assignable to an optional, a timestamp, a duration and opaque types
        other = b if a == "null" else a
        return other if other in ("null", "optional") or not (other in _PRIMITIVE or isinstance(other, tuple)) \
            else None
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or a[0] != b[0] or len(a) != len(b):
            return None
        parts = [unify(x, y) for x, y in zip(a[1:], b[1:])]
        return None if None in parts else (a[0], *parts)
    return a if a == b else None


def element(kind: Any) -> Any:
    """What `in` looks for in a list or a map (its key); None for what is neither."""
    if kind == DYN:
        return DYN
    if isinstance(kind, tuple) and kind[0] in ("list", "map"):
        return kind[1]
    return "string" if _struct(kind) else None


# ---------------------------------------------------------------- cel-go's overloads
_CONVERSION_ARGS = {
    "int": {"int", "uint", "double", "string", "timestamp", "duration"}, "uint": {"int", "uint", "double", "string"},
    "double": {"int", "uint", "double", "string"}, "bool": {"bool", "string"}, "bytes": {"bytes", "string"},
    # string(ip) and string(cidr) are Kubernetes' overloads
    "string": {"int", "uint", "double", "bool", "string", "bytes", "timestamp", "duration", "net.IP", "net.CIDR"},
    "timestamp": {"int", "string", "timestamp"},
}
_TIME_ACCESSORS = frozenset({"getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
                             "getHours", "getMinutes", "getSeconds", "getMilliseconds"})
_DURATION_ACCESSORS = frozenset({"getHours", "getMinutes", "getSeconds", "getMilliseconds"})


def time_call(name: str, kinds: list, member: bool) -> Optional[Any]:
    """The type of a call on timestamps and durations, which the function table leaves untyped: timestamp() and
    duration() give theirs, the accessors an int; None for any other call."""
    if name == "timestamp" and not member and len(kinds) == 1 and kinds[0] in (DYN, name, "string", "int", "null"):
        return name
    if name == "duration" and not member and len(kinds) == 1 and kinds[0] in (DYN, name, "string", "null"):
        return name
    if name in _TIME_ACCESSORS and member and len(kinds) in (1, 2) and kinds[-1] in (DYN, "string", *kinds[:1]):
        return "int"
    return None


def overload_problem(name: str, kinds: list, member: bool) -> Optional[str]:
    """Why cel-go has no overload of `name` for these argument types (receiver first), or None.

    A dyn (a timestamp or a duration too, to the checker) and aiadmit's own structs are left to run time."""
    first = kinds[0] if kinds else DYN
    if first == "null" and name in ("int", "string", "timestamp", *_TIME_ACCESSORS):
        return None  # cel-go: null is assignable to a timestamp or a duration (int(null) compiles)
    if name in _CONVERSION_ARGS and len(kinds) == 1 and known(first) and first not in _CONVERSION_ARGS[name]:
        return ""
    if name == "size" and len(kinds) == 1 and known(first) and first not in ("string", "bytes") \
            and _head(first) not in ("list", "map"):
        return ""
    if name in _TIME_ACCESSORS and member and known(first) and not (
            first == "timestamp" or (first == "duration" and name in _DURATION_ACCESSORS and len(kinds) == 1)):
        return "a timestamp's accessor" if name not in _DURATION_ACCESSORS else "a timestamp or a duration's accessor"
    if name in ("indexOf", "lastIndexOf") and member:
        if first == "string" and any(known(k) and k != want for k, want in zip(kinds[1:], ("string", "int"))):
            return "a string's indexOf takes a string (and an int start)"
        if known(first) and first != "string" and _head(first) != "list":
            return "indexOf takes a string or a list"
    if name.startswith("sets.") and len(kinds) == 2 and unify(first, kinds[1]) is None:
        return "the two lists hold different types"
    return None


# ---------------------------------------------------------------- Kubernetes' literal validators
def plain(kind: Any) -> Any:
    """`kind` with every sure dyn a plain one: what a check answers (a recorded check, as JSON, gives the same)."""
    if isinstance(kind, tuple):
        return tuple(plain(part) for part in kind)
    return DYN if kind == DYN else kind


def equivalent(a: Any, b: Any) -> bool:
    """cel-go's IsEquivalentType as far as the checker knows: a plain (unknown) dyn matches anything, a sure dyn only
    a dyn (inside lists and maps too)."""
    if (a == DYN and a is not SURE_DYN) or (b == DYN and b is not SURE_DYN):
        return True
    if a == DYN or b == DYN:
        return a == b
    return _inner(a, b)


def _inner(a: Any, b: Any) -> bool:
    if a is SURE_DYN or b is SURE_DYN:  # list(dyn) is not list(int)
        return a == b or (a == DYN and a is not SURE_DYN) or (b == DYN and b is not SURE_DYN)
    if a == DYN or b == DYN or _struct(a) or _struct(b):
        return True
    if isinstance(a, tuple) and isinstance(b, tuple):
        return a[0] == b[0] and len(a) == len(b) and all(_inner(x, y) for x, y in zip(a[1:], b[1:]))
    return a == b


def mismatch(kinds: list) -> Optional[tuple[int, str]]:
    """The first element of a list literal (by index) whose type is not the first element's, and Kubernetes' words."""
    for index, kind in enumerate(kinds[1:], 1):
        if not equivalent(kinds[0], kind):
            return index, (f"expected type '{show(kinds[0])}' but found '{show(kind)}' (a list or map literal "
                           "holds one type, as in Kubernetes: dyn(...) marks a value meant to differ)")
    return None


def constant_problem(name: str, value: Any, convert: Any) -> Optional[str]:
    """ValidateDurationLiterals / ValidateTimestampLiterals: duration() or timestamp() of a constant that fails."""
    try:
        convert(value)
    except Exception as exc:  # noqa: BLE001 - any failure of the conversion is the literal's fault
        return f"invalid {name} argument: {exc}"
    return None


# The format verbs and the types each takes (cel-go ext/formatting.go, stringFormatChecker)
_VERBS = {
    "s": ("string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, "
          "and timestamps", {"string", "bool", "bytes", "int", "uint", "double", "type", "null", "list", "map",
                             "timestamp", "duration"}),
    "d": ("decimal clause can only be used on integers", {"int", "uint"}),
    "o": ("octal clause can only be used on integers", {"int", "uint"}),
    "f": ("fixed-point clause can only be used on doubles", {"double", "string"}),
    "e": ("scientific clause can only be used on doubles", {"double", "string"}),
    "b": ("only integers and bools can be formatted as binary", {"int", "uint", "bool"}),
    "x": ("only integers, byte buffers, and strings can be formatted as hex", {"int", "uint", "string", "bytes"}),
}
_VERBS["X"] = _VERBS["x"]


# How cel-go names the two in format()'s errors
_TIME_TYPES = {"duration": "google.protobuf.Duration", "timestamp": "google.protobuf.Timestamp"}


def _type_name(kind: Any) -> str:
    return "null_type" if kind == "null" else _TIME_TYPES.get(kind) or str(_head(kind))


def format_problem(template: str, kinds: list, string_problem) -> Optional[tuple[Any, str]]:
    """cel-go's check of `"<constant>".format([<list literal>])`: (where: the argument's index, None for the list, or
    what `string_problem` named; what is wrong), or None.

    `string_problem(index)` says which nested part of argument `index` %s cannot show, as (where, type) or None."""
    args = kinds
    position, used = 0, 0
    while position < len(template):
        if template[position] != "%":
            position += 1
            continue
        position += 1
        if position < len(template) and template[position] == ".":
            position += 1
            while position < len(template) and template[position].isdigit():
                position += 1
        if position >= len(template):
            return None, "could not parse formatting clause: unexpected end of string"
        verb = template[position]
        position += 1
        if verb == "%":
            continue
        if verb not in _VERBS:
            return None, f'could not parse formatting clause: unrecognized formatting clause "{verb}"'
        if used >= len(args):
            return None, f"index {used} out of range"
        kind = kinds[used]
        words, takes = _VERBS[verb]
        if verb == "s":
            bad = string_problem(used)
            if bad is not None:
                return bad[0], f"error during formatting: {words}, was given {_type_name(bad[1])}"
        elif kind != DYN and not _struct(kind) and _head(kind) not in takes:
            return used, f"error during formatting: {words}, was given {_type_name(kind)}"
        used += 1
    if len(args) > used:
        return None, f"too many arguments supplied to string.format (expected {used}, got {len(args)})"
    return None


def shows(kind: Any) -> bool:
    """Whether %s can show a value of this type (a dyn is left to run time; Kubernetes' own types it cannot)."""
    return kind == DYN or _head(kind) in _VERBS["s"][1] or _struct(kind)


def validate(checker: Any, name: str, arguments: tuple, scope: Any) -> None:
    """Kubernetes' validators of constant arguments to duration(), timestamp() and format() (CheckError if bad)."""
    if name in ("duration", "timestamp") and len(arguments) == 1 and arguments[0][0] == "lit":
        problem = constant_problem(name, arguments[0][1], _duration if name == "duration" else _timestamp)
        if problem:
            raise checker.fail(arguments[0], problem)
    if name == "format" and len(arguments) == 2 and arguments[0][0] == "lit" and type(arguments[0][1]) is str \
            and arguments[1][0] == "list":
        items = arguments[1][1]
        checker.exempt += 1  # the arguments of a format() call need not be homogeneous
        try:
            found = format_problem(arguments[0][1], [checker.check(item, scope) for item in items],
                                   lambda index: unshowable(checker, items[index], scope))
        finally:
            checker.exempt -= 1
        if found:
            where = found[0]
            raise checker.fail(arguments[1] if where is None else items[where] if type(where) is int else where,
                               found[1])


def unshowable(checker: Any, node: tuple, scope: Any) -> Optional[tuple]:
    """(the node, its type) of the part of a format() argument %s cannot show (literals looked into), or None."""
    kind = checker.check(node, scope)
    if not shows(kind):
        return node, kind
    parts = node[1] if node[0] == "list" else [p for entry in node[1] for p in entry] if node[0] == "map" else ()
    for part in parts:
        part = part[1] if part[0] == "optitem" else part  # `[?x]`, `{?k: v}`: Kubernetes looks at the optional
        found = unshowable(checker, part, scope)
        if found:
            return found
    return None
