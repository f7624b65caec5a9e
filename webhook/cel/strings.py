"""cel-go's strings and math extensions (the parts Kubernetes enables), over Python str and numbers.

Indices count code points, as in cel-go. `lowerAscii`/`upperAscii` change ASCII letters only (Python's
`str.lower` would also lower `É`). Errors are EvalError with cel-go's wording where it has one.
"""

from __future__ import annotations

import math
from typing import Any

from webhook.cel.values import UInt

from webhook.cel.conversions import to_string
from webhook.cel.runtime import EvalError, MAX_SIZE, expecting, overload

_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}
_UPPER = {code: code - 32 for code in range(ord("a"), ord("z") + 1)}


_str = expecting(str)


_int = expecting(int)


def lower_ascii(text: Any) -> str:
    return _str(text, "lowerAscii").translate(_LOWER)


def upper_ascii(text: Any) -> str:
    return _str(text, "upperAscii").translate(_UPPER)


def char_at(text: Any, index: Any) -> str:
    text, index = _str(text, "charAt"), _int(index, "charAt")
    if index < 0 or index > len(text):
        raise EvalError(f"index out of range: {index}")
    return text[index:index + 1]


def index_of(text: Any, part: Any, start: Any = None) -> int:
    text, part = _str(text, "indexOf"), _str(part, "indexOf")
    start = 0 if start is None else _int(start, "indexOf")
    if start < 0 or start > len(text):
        raise EvalError(f"index out of range: {start}")
    return text.find(part, start)


def last_index_of(text: Any, part: Any, start: Any = None) -> int:
    text, part = _str(text, "lastIndexOf"), _str(part, "lastIndexOf")
    if start is None:
        return text.rfind(part)
    start = _int(start, "lastIndexOf")
    if start < 0 or start > len(text):
        raise EvalError(f"index out of range: {start}")
    return text.rfind(part, 0, start + len(part))


def replace(text: Any, old: Any, new: Any, count: Any = -1) -> str:
    text, old, new = _str(text, "replace"), _str(old, "replace"), _str(new, "replace")
    count = _int(count, "replace")
    if old and len(new) > len(old) and (len(text) // len(old)) * len(new) > MAX_SIZE:
        raise EvalError(f"replace() result larger than {MAX_SIZE} characters")
    return text.replace(old, new, count if count >= 0 else -1)


def split(text: Any, sep: Any, limit: Any = -1) -> list:
    text, sep, limit = _str(text, "split"), _str(sep, "split"), _int(limit, "split")
    if limit == 0:
        return []
    if sep == "":
        parts = list(text)
        if limit > 0 and len(parts) > limit:
            parts = parts[:limit - 1] + ["".join(parts[limit - 1:])]
        return parts
    return text.split(sep, limit - 1 if limit > 0 else -1)


def substring(text: Any, start: Any, end: Any = None) -> str:
    text, start = _str(text, "substring"), _int(start, "substring")
    end = len(text) if end is None else _int(end, "substring")
    if start < 0 or start > len(text) or end > len(text) or end < start:
        raise EvalError(f"index out of range: {start}, {end}")
    return text[start:end]


def trim(text: Any) -> str:
    return _str(text, "trim").strip()


def reverse(text: Any) -> str:
    return _str(text, "reverse")[::-1]


def quote(text: Any) -> str:
    text = _str(text, "strings.quote")
    out = ['"']
    for char in text:
        out.append({"\\": "\\\\", '"': '\\"', "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                    "\t": "\\t", "\v": "\\v"}.get(char, char))
    out.append('"')
    return "".join(out)


def format_(template: Any, args: Any) -> str:
    """cel-go's `"%s of %d".format([a, b])`: the verbs %s %d %f %e %x %X %o %b %%."""
    template = _str(template, "format")
    if type(args) is not list:
        raise overload("format", template, args)
    out, position, used = [], 0, 0
    while position < len(template):
        char = template[position]
        if char != "%":
            out.append(char)
            position += 1
            continue
        position += 1
        precision = None
        if position < len(template) and template[position] == ".":
            end = position + 1
            while end < len(template) and template[end].isdigit():
                end += 1
            precision, position = int(template[position + 1:end] or 0), end
        if position >= len(template):
            raise EvalError("format: a verb is missing after %")
        verb = template[position]
        position += 1
        if verb == "%":
            out.append("%")
            continue
        if used >= len(args):
            raise EvalError("format: too few arguments")
        value = args[used]
        used += 1
        out.append(_verb(verb, value, precision))
    return "".join(out)


def _special(value: float) -> str | None:
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return None


def show(value: Any) -> str:
    """`%s` of a value, as cel-go prints it: strings bare, lists and maps in CEL's brackets."""
    kind = type(value)
    if kind is str:
        return value
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is float:
        special = _special(value)
        return special if special is not None else to_string(value)
    if kind is list:
        return "[" + ", ".join(show(item) for item in value) + "]"
    if kind is dict:
        return "{" + ", ".join(sorted(f"{show(k)}: {show(v)}" for k, v in value.items())) + "}"  # cel-go sorts
    if kind.__name__ == "CelType":
        return value.name
    return to_string(value)


def _verb(verb: str, value: Any, precision: Any) -> str:
    kind = type(value)
    if verb == "s":
        return show(value)
    if kind is float and verb in "dfe" and _special(value) is not None:
        return _special(value)
    if verb == "d" and kind in (int, UInt):
        return str(int(value))
    if verb in "fe" and kind in (int, UInt, float):
        return f"{float(value):.{6 if precision is None else precision}{verb}}"
    if verb == "b" and kind is bool:
        return "1" if value else "0"
    if verb in "xX" and kind in (str, bytes):
        text = (value.encode() if kind is str else value).hex()
        return text.upper() if verb == "X" else text
    if verb in "xXob" and kind in (int, UInt):
        return format(int(value), verb)
    raise EvalError(f"format: %{verb} does not take a {kind.__name__}")


def _bits(name: str, how):
    def call(*values: Any) -> Any:
        kinds = {type(v) for v in values}
        if len(kinds) != 1 or kinds.pop() not in (int, UInt):
            raise overload(name, *values)
        return how(*values)
    return call


def _wrap(value: int, like: Any) -> Any:
    if type(like) is UInt:
        return UInt(value & (2 ** 64 - 1))
    value &= 2 ** 64 - 1
    return value - 2 ** 64 if value >= 2 ** 63 else value


def _shift(name: str, left: bool):
    def call(value: Any, count: Any) -> Any:
        if type(value) not in (int, UInt) or type(count) is not int:
            raise overload(name, value, count)
        if count < 0:
            raise EvalError(f"{name}: negative shift {count}")
        if count >= 64:
            return type(value)(0)
        unsigned = int(value) & (2 ** 64 - 1)
        return _wrap((unsigned << count) if left else (unsigned >> count), value)
    return call


BITS = {
    "math.bitAnd": _bits("math.bitAnd", lambda a, b: type(a)(int(a) & int(b))),
    "math.bitOr": _bits("math.bitOr", lambda a, b: type(a)(int(a) | int(b))),
    "math.bitXor": _bits("math.bitXor", lambda a, b: type(a)(int(a) ^ int(b))),
    "math.bitNot": _bits("math.bitNot", lambda a: _wrap(~int(a), a)),
    "math.bitShiftLeft": _shift("math.bitShiftLeft", True),
    "math.bitShiftRight": _shift("math.bitShiftRight", False),
}


def need_double(value: Any, name: str) -> float:
    if type(value) is float:
        return value
    raise overload(name, value)


def math_abs(value: Any) -> Any:
    if type(value) is int:
        if value == -(2 ** 63):
            raise EvalError("int overflow")
        return abs(value)
    if type(value) in (float, UInt):
        return type(value)(abs(value))
    raise overload("math.abs", value)


def math_sign(value: Any) -> Any:
    if type(value) in (int, float, UInt):
        result = (value > 0) - (value < 0)
        return type(value)(result) if type(value) is not int else result
    raise overload("math.sign", value)


def math_round(how: str):
    def call(value: Any) -> float:
        value = need_double(value, f"math.{how}")
        if not math.isfinite(value):
            return value
        if how == "ceil":
            return float(math.ceil(value))
        if how == "floor":
            return float(math.floor(value))
        if how == "trunc":
            return float(math.trunc(value))
        return float(math.floor(abs(value) + 0.5)) * (1.0 if value >= 0 else -1.0)  # half away from zero
    return call


def math_sqrt(value: Any) -> float:
    if type(value) not in (int, UInt, float):
        raise overload("math.sqrt", value)
    value = float(value)
    return math.sqrt(value) if value >= 0 else math.nan
