"""CEL values and their operators, as the Python code webhook/cel/compiler.py generates calls them.

Values are CEL's, carried as the plain Python values the YAML and JSON
decoders produce: int, uint (UInt), double (float), string, bytes, bool, null
(None), list, map (dict). Arithmetic needs operands of one type (`1 + 1.0` is
an error) and int arithmetic errors on 64-bit overflow; equality and ordering
compare numbers across int/uint/double, and values of other different types
are simply not equal. A missing key, a wrong type, a division by zero raise
EvalError (or a Python lookup error the generated code translates).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from webhook.cel.values import INT64_MAX, INT64_MIN, UINT64_MAX, UInt
from webhook.cel.messages import Message
from webhook.cel.quantities import Quantity
from webhook.cel.values import NONE, EvalError, Optional, Unsupported, Variables  # noqa: F401 - re-exported

_NUMBERS = (int, float, UInt, Quantity)  # Quantity: a quantity the double alone does not describe (cel/quantities.py)
_KEYS = (str, int, bool, UInt)
# No string or list a rule builds may be larger (characters or items): an object is at most 3 MiB (the API server's
# request limit), so only a concatenation or join bomb gets here, and it stops before it costs the process its memory.
MAX_SIZE = 8 * 1024 * 1024
# Comprehension iterations one evaluation of one expression may take (the run-time bound; cel/cost.py is the static
# one): a million is about a second of generated Python, inside any review budget.
MAX_STEPS = 1_000_000




class CelType:
    """A CEL type as a value: what `type(x)` answers and what the names `int`, `list`, ... denote."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


TYPES = {name: CelType(name) for name in
         ("bool", "int", "uint", "double", "string", "bytes", "null_type", "list", "map", "type", "optional_type")}
_TYPE_OF = {bool: TYPES["bool"], int: TYPES["int"], UInt: TYPES["uint"], float: TYPES["double"],
            str: TYPES["string"], bytes: TYPES["bytes"], type(None): TYPES["null_type"], list: TYPES["list"],
            dict: TYPES["map"], CelType: TYPES["type"], Optional: TYPES["optional_type"], Quantity: TYPES["double"]}


_SIMPLE = (str, int, float, bool, type(None), bytes, UInt, CelType)
# Timestamps and durations (cel/timestamps.py registers them: it builds on this module): type -> its CEL type
_TIME: dict = {}
_TIME_OPS: dict = {}


def register_time(timestamp: type, duration: type, add_: Callable, subtract: Callable, text: Callable) -> None:
    for kind, name in ((timestamp, "google.protobuf.Timestamp"), (duration, "google.protobuf.Duration")):
        TYPES[name] = CelType(name)
        _TYPE_OF[kind] = _TIME[kind] = TYPES[name]
    _TIME_OPS.update({"+": add_, "-": subtract, "string": text, "timestamp": timestamp})


# The Kubernetes library types (net.IP, net.CIDR, kubernetes.URL, kubernetes.Semver, kubernetes.NamedFormat):
# Python classes with a `cel_type` name, equal by their own __eq__ (cel/kubernetes.py registers them)
_OPAQUE: dict = {}


def register_type(kind: type) -> None:
    TYPES.setdefault(kind.cel_type, CelType(kind.cel_type))
    _TYPE_OF[kind] = _OPAQUE[kind] = TYPES[kind.cel_type]


def type_of(value: Any) -> CelType:
    found = _TYPE_OF.get(type(value))
    if found is None:
        raise EvalError(f"a value of Python type {type(value).__name__} has no CEL type")
    return found


def overload(name: str, *values: Any) -> EvalError:
    kinds = ", ".join(_type_name(v) for v in values)
    return EvalError(f"no such overload: {name}({kinds})")


def expecting(kind: type) -> Callable[[Any, str], Any]:
    """A check that an argument of function `name` is exactly of `kind` (CEL has no implicit conversion): the
    value, else the "no such overload" error. One per kind, shared by the libraries."""
    def check(value: Any, name: str) -> Any:
        if type(value) is kind:
            return value
        raise overload(name, value)
    return check


def _type_name(value: Any) -> str:
    found = _TYPE_OF.get(type(value))
    return found.name if found is not None else type(value).__name__


# ---------------------------------------------------------------- value semantics
def equals(a: Any, b: Any) -> bool:
    """CEL equality: numbers compare across int/uint/double, other types never equal each other."""
    ta, tb = type(a), type(b)
    if ta is tb and ta in _SIMPLE:
        return a == b
    if ta in _NUMBERS and tb in _NUMBERS:
        return a == b
    if ta is list and tb is list:
        return len(a) == len(b) and all(equals(x, y) for x, y in zip(a, b))
    if ta is Optional and tb is Optional:
        return (a is NONE and b is NONE) or (a is not NONE and b is not NONE and equals(a.value, b.value))
    if ta is tb and ta in _TIME:
        return a.ns == b.ns
    if ta is tb and ta in _OPAQUE:
        return a == b
    if ta is Message and tb is Message and a.type_name != b.type_name:
        return False
    if (ta is dict and tb is dict) or (ta is Message and tb is Message):
        if len(a) != len(b):
            return False
        for key, value in a.items():
            other = _lookup(b, key)
            if other is _MISSING or not equals(value, other):
                return False
        return True
    return False


_MISSING = object()


def _lookup(mapping: dict, key: Any) -> Any:
    """mapping[key] with CEL key equality (1 and 1u and 1.0 name the same key; true does not)."""
    found = mapping.get(key, _MISSING)
    if found is not _MISSING and type(key) is not bool and not any(type(k) is bool for k in mapping):
        return found
    for candidate, value in mapping.items():
        if equals(candidate, key):
            return value
    return _MISSING


def less(a: Any, b: Any, op: str) -> bool:
    ta, tb = type(a), type(b)
    if ta is not tb and (ta is float or tb is float) and ta in _NUMBERS and tb in _NUMBERS:
        a, b = float(a), float(b)  # int against double compares as doubles (cel-go): 2**63-1 is not < 2.0**63
        ta = tb = float
    if ta is tb and ta in _TIME:
        a, b = a.ns, b.ns
    elif (ta is tb and ta in (str, int, float, bytes, bool, UInt)) or (ta in _NUMBERS and tb in _NUMBERS):
        pass
    else:
        raise overload(op, a, b)
    if ta is float and (a != a or b != b):
        raise unordered()
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def _int(value: int) -> int:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise EvalError("int overflow")


def _uint(value: int) -> UInt:
    if 0 <= value <= UINT64_MAX:
        return UInt(value)
    raise EvalError("uint overflow")


def add(a: Any, b: Any) -> Any:
    ta = type(a)
    if ta is type(b):
        if ta is int:
            return _int(a + b)
        if ta is float:
            return a + b
        if ta in (str, bytes, list):
            if len(a) + len(b) > MAX_SIZE:
                raise EvalError(f"+ result larger than {MAX_SIZE} (characters or items)")
            return a + b
        if ta is UInt:
            return _uint(a + b)
    if ta in _TIME or type(b) in _TIME:
        return _TIME_OPS["+"](a, b)
    raise overload("+", a, b)


def arith(op: str, a: Any, b: Any) -> Any:
    ta = type(a)
    if op == "-" and (ta in _TIME or type(b) in _TIME):
        return _TIME_OPS["-"](a, b)
    if ta is not type(b) or ta not in (int, float, UInt):
        raise overload(op, a, b)
    wrap = _int if ta is int else (_uint if ta is UInt else float)
    if op == "-":
        return wrap(a - b)
    if op == "*":
        return wrap(a * b)
    if ta is float:
        if op == "%":
            raise overload(op, a, b)
        if b == 0.0:
            if a != a or a == 0.0:
                return float("nan")
            return math.copysign(float("inf"), a) * math.copysign(1.0, b)
        return a / b
    if b == 0:
        raise EvalError("division by zero" if op == "/" else "modulo by zero")
    if ta is int and a == INT64_MIN and b == -1:  # the one quotient (and its remainder) int64 cannot hold
        raise EvalError("int overflow")
    quotient = abs(a) // abs(b)
    if op == "/":
        return wrap(quotient if (a < 0) == (b < 0) else -quotient)
    remainder = abs(a) - quotient * abs(b)
    return wrap(-remainder if a < 0 else remainder)


def contains(container: Any, item: Any) -> bool:
    kind = type(container)
    if kind is list:
        if type(item) is str:
            return item in container  # a Python str equals no value of another type: exactly CEL's equality
        return any(equals(item, x) for x in container)
    if kind is dict:
        if type(item) is str:
            return item in container
        return _lookup(container, item) is not _MISSING
    raise overload("in", item, container)


def select(value: Any, field: str) -> Any:
    if type(value) is dict:
        try:
            return value[field]
        except KeyError:
            raise EvalError(f"no such key: {field}") from None
    if type(value) is Variables:
        return value.get(field)
    if type(value) is Optional:  # `x.?a.b`: selection on an optional chains
        return opt_select(value, field)
    if isinstance(value, Message):  # `Object.spec{...}.x` (cel/messages.py): a message's field
        if field in value:
            return value[field]
        raise EvalError(f"no such field: {field}")
    raise EvalError(f"no such field {field!r} on a {_type_name(value)}")


def index(value: Any, key: Any) -> Any:
    kind = type(value)
    if kind is list:
        if type(key) is float and key.is_integer():  # `[7, 8][dyn(0.0)]`: a numeric index (cel-go)
            key = int(key)
        if type(key) not in (int, UInt):
            raise overload("[]", value, key)
        if 0 <= key < len(value):
            return value[key]
        raise EvalError(f"index out of bounds: {key}")
    if kind is dict:
        if type(key) is str:
            try:
                return value[key]
            except KeyError:
                raise EvalError(f"no such key: {key}") from None
        if type(key) not in _KEYS and type(key) is not float:
            raise overload("[]", value, key)
        found = _lookup(value, key)
        if found is _MISSING:
            raise EvalError(f"no such key: {key}")
        return found
    if kind is Optional:
        return opt_select(value, key)
    raise overload("[]", value, key)


def size(value: Any) -> int:
    if type(value) in (str, bytes, list, dict):
        return len(value)
    raise overload("size", value)


def string_method(name: str) -> Callable[[Any, Any], bool]:
    method = {"startsWith": str.startswith, "endsWith": str.endswith, "contains": str.__contains__}[name]

    def call(text: Any, part: Any) -> bool:
        if type(text) is str and type(part) is str:
            return method(text, part)
        raise overload(name, text, part)
    return call


def unordered() -> Any:
    """Raise the error of ordering a NaN (cel-go: "NaN values cannot be ordered"), where a `<` compiled inline
    found one: every ordering of a NaN is false in Python, so the inline test looks only when it answered false."""
    raise EvalError("NaN values cannot be ordered")


def fail(error: EvalError) -> Any:
    """Raise `error`: lets a generated expression fail where Python has no raise expression."""
    raise error


def negate(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        return _int(-value)
    if kind is float:
        return -value
    raise overload("-", value)


def has_field(value: Any, field: str) -> bool:
    if type(value) is dict:
        return field in value
    if type(value) is Variables:
        return field in value.programs
    if type(value) is Optional:  # `has(x.?a.b)`: false when the chain is empty
        return value is not NONE and has_field(value.value, field)
    if isinstance(value, Message):
        return field in value
    raise overload("has", value)


def over_budget() -> EvalError:
    return EvalError(f"evaluation exceeded {MAX_STEPS} comprehension steps (the run-time cost bound)")


def opt_select(value: Any, field: Any) -> Optional:
    """`x.?f` and `x[?k]`: optional.of(x.f) when x has it, none when it does not (or x is itself none)."""
    if type(value) is Optional:
        if value is NONE:
            return NONE
        value = value.value
    if type(value) is dict:
        if type(field) is str:
            return Optional(value[field]) if field in value else NONE
        found = _lookup(value, field)
        return NONE if found is _MISSING else Optional(found)
    if type(value) is list and type(field) in (int, UInt):
        return Optional(value[field]) if 0 <= field < len(value) else NONE
    raise overload("_?._", value, field)


def pairs(value: Any) -> Any:
    """What a two-variable comprehension walks: (index, item) of a list, (key, value) of a map."""
    return enumerate(value) if type(value) is list else value.items()


def iterable(value: Any, macro: str) -> Any:
    """What a comprehension walks: a list's items or a map's keys."""
    if type(value) in (list, dict):
        return value
    raise overload(macro, value)


def opt_list(entries: list) -> list:
    """`[a, ?b]`: (optional?, value) pairs; an optional element is kept only when it has a value."""
    out = []
    for optional, value in entries:
        if optional:
            if type(value) is not Optional:
                raise overload("[?_]", value)
            if value is not NONE:
                out.append(value.value)
        else:
            out.append(value)
    return out


def opt_entries(entries: list) -> list:
    """`{?k: v}`: (optional?, key, value) triples as the (key, value) pairs that are kept."""
    out = []
    for optional, key, value in entries:
        if optional:
            if type(value) is not Optional:
                raise overload("{?_: _}", value)
            if value is not NONE:
                out.append((key, value.value))
        else:
            out.append((key, value))
    return out


def make_map(entries: list) -> dict:
    out: dict = {}
    for key, value in entries:
        if type(key) not in _KEYS:
            raise EvalError(f"a {_type_name(key)} cannot be a map key")
        if (key in out) if type(key) is str else (_lookup(out, key) is not _MISSING):
            raise EvalError(f"duplicate map key: {key!r}")
        if type(key) is not str and key in out:  # true and 1 (false and 0): two CEL keys, one key of a Python dict
            raise EvalError(f"a map with the keys {key!r} and {next(k for k in out if k == key)!r}: aiadmit's maps "
                            f"cannot keep both (no JSON object has them); an error rather than an entry lost")
        out[key] = value
    return out


def translate(exc: Exception, activation: Any, free: frozenset) -> EvalError:
    """A Python error met by generated code, as the CEL error it stands for."""
    if isinstance(exc, EvalError):
        return exc
    if isinstance(exc, KeyError) and exc.args:
        key = exc.args[0]
        if key in free and key not in activation:
            return EvalError(f"undeclared reference to {key!r}")
        return EvalError(f"no such key: {key}")
    if isinstance(exc, IndexError):
        return EvalError("index out of bounds")
    return EvalError(str(exc) or type(exc).__name__)
