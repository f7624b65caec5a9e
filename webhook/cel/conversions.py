"""CEL's type conversions (`int()`, `uint()`, `double()`, `string()`, `bool()`, `bytes()`), exactly as cel-go.

Strings are parsed strictly (ASCII digits only: Python's int() would take "1_000" and " 1"), numbers are range
checked (an int is 64-bit), and `string()` spells doubles as cel-go does. Timestamps (cel/timestamps.py) convert
through the registry in runtime.
"""

from __future__ import annotations

import math
from typing import Any

from webhook.cel.values import UInt
from webhook.cel.runtime import _OPAQUE, _TIME, _TIME_OPS, EvalError, _int, _uint, overload
from webhook.model.lazyre import Lazy

_INTEGER = Lazy(r"[+-]?[0-9]+")  # ASCII digits only: Python's int() would also take "1_000" and " 1"
_DOUBLE = Lazy(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:[iI]nf(?:inity)?|NaN|nan)")


def to_int(value: Any) -> int:
    kind = type(value)
    if kind is int:
        return value
    if kind is UInt:
        return _int(int(value))
    if kind is float:
        if value != value or not (-9.223372036854775808e18 < value < 9.223372036854775807e18):
            raise EvalError("int() of a double out of range")
        return int(value)
    if kind is str:
        if not _INTEGER.fullmatch(value):
            raise EvalError(f"int() cannot parse {value!r}")
        return _int(int(value, 10))
    if kind is _TIME_OPS.get("timestamp"):
        return value.ns // 1_000_000_000
    raise overload("int", value)


def to_uint(value: Any) -> UInt:
    kind = type(value)
    if kind in (int, UInt):
        return _uint(int(value))
    if kind is float:
        if value != value or not (0 <= value < 1.8446744073709552e19):
            raise EvalError("uint() of a double out of range")
        return UInt(int(value))
    if kind is str:
        if not _INTEGER.fullmatch(value) or value.startswith("-"):
            raise EvalError(f"uint() cannot parse {value!r}")
        return _uint(int(value, 10))
    raise overload("uint", value)


def to_double(value: Any) -> float:
    kind = type(value)
    if kind in (int, UInt, float):
        return float(value)
    if kind is str:
        if not _DOUBLE.fullmatch(value):
            raise EvalError(f"double() cannot parse {value!r}")
        parsed = float(value)
        if parsed in (math.inf, -math.inf) and "n" not in value.lower():  # 1e400: out of range, as in Kubernetes
            raise EvalError(f"double() of {value!r}: out of range")
        return parsed
    raise overload("double", value)


def to_string(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return value
    if kind in (int, UInt):
        return str(int(value))
    if kind is float:
        if value.is_integer() and abs(value) < 1e16:
            return "-0" if value == 0 and math.copysign(1.0, value) < 0 else str(int(value))
        return repr(value)
    if kind is bytes:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise EvalError("string() of bytes that are not UTF-8") from None
    if kind in _TIME:
        return _TIME_OPS["string"](value)
    if kind in _OPAQUE and hasattr(value, "cel_string"):  # string(ip), string(cidr): Kubernetes' conversions
        return value.cel_string()
    raise overload("string", value)


def to_bool(value: Any) -> bool:
    if type(value) is bool:
        return value
    if type(value) is str:
        if value in ("1", "t", "true", "TRUE", "True"):
            return True
        if value in ("0", "f", "false", "FALSE", "False"):
            return False
        raise EvalError(f"bool() cannot parse {value!r}")
    raise overload("bool", value)


def to_bytes(value: Any) -> bytes:
    if type(value) is bytes:
        return value
    if type(value) is str:
        return value.encode("utf-8")
    raise overload("bytes", value)
