"""Reading the CEL conformance files (protobuf text format) without protobuf, and their values as Python values.

Why here: the suite is data (tests/data/cel-spec, copied from google/cel-spec) and needs only a reader for the
subset of the text format those files use: `field: scalar`, `field { ... }` / `field: { ... }`, strings in either
quote with C escapes (adjacent strings join), numbers, enum names, `#` comments. Messages become dicts whose values
are lists (fields repeat).
"""

from __future__ import annotations

import math
import re
from typing import Any

from webhook.cel.parser import UInt
from webhook.cel.runtime import TYPES

_TOKEN = re.compile(r"""\s+|\#[^\n]*|(?P<str>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')|(?P<punct>[{}:\[\],<>])|"""
                    r"""(?P<word>[-+]?[A-Za-z0-9_./][A-Za-z0-9_./+-]*)""", re.S)
_ESC = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\", "'": "'",
        '"': '"', "?": "?"}


def _unescape(body: str) -> bytes:
    out, i = bytearray(), 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out += char.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESC:
            out += _ESC[nxt].encode()
            i += 2
        elif nxt in "xX":
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        elif nxt in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(int(body[i + 1:j], 8) & 0xFF)
            i = j
        elif nxt == "u":
            out += chr(int(body[i + 2:i + 6], 16)).encode("utf-8", "surrogatepass")
            i += 6
        elif nxt == "U":
            out += chr(int(body[i + 2:i + 10], 16)).encode("utf-8", "surrogatepass")
            i += 10
        else:
            out += nxt.encode()
            i += 2
    return bytes(out)


def _tokens(text: str) -> list:
    out, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"cannot read textproto at {position}: {text[position:position + 30]!r}")
        position = match.end()
        if match.group("str") is not None:
            raw = _unescape(match.group("str")[1:-1])
            if out and out[-1][0] == "str":  # adjacent strings concatenate
                out[-1] = ("str", out[-1][1] + raw)
            else:
                out.append(("str", raw))
        elif match.group("punct"):
            out.append(("p", match.group("punct")))
        elif match.group("word"):
            out.append(("w", match.group("word")))
    return out


def parse(text: str) -> dict:
    tokens = _tokens(text)
    message, at = _message(tokens, 0, None)
    return message


def _message(tokens: list, at: int, end: Any) -> tuple[dict, int]:
    message: dict = {}
    while at < len(tokens) and tokens[at] != ("p", end):
        kind, name = tokens[at]
        if tokens[at + 1] == ("p", ":"):
            at += 1
        at += 1
        if tokens[at] in (("p", "{"), ("p", "<")):
            close = "}" if tokens[at][1] == "{" else ">"
            value, at = _message(tokens, at + 1, close)
            at += 1
        elif tokens[at] == ("p", "["):
            values, at = [], at + 1
            while tokens[at] != ("p", "]"):
                if tokens[at] == ("p", ","):
                    at += 1
                    continue
                values.append(tokens[at][1])
                at += 1
            at += 1
            message.setdefault(name, []).extend(values)
            continue
        else:
            value = tokens[at][1]
            at += 1
        message.setdefault(name, []).append(value)
        if at < len(tokens) and tokens[at] in (("p", ","), ("p", ";")):
            at += 1
    return message, at


class Unrepresentable(Exception):
    """A value this engine has no form for (protobuf messages, enums): the test is skipped with this reason."""


def _one(message: dict, name: str, default: Any = None) -> Any:
    return message.get(name, [default])[0]


def _number(word: Any) -> float:
    text = word.decode() if isinstance(word, bytes) else str(word)
    lowered = text.lower()
    if lowered in ("inf", "infinity", "+inf"):
        return math.inf
    if lowered in ("-inf", "-infinity"):
        return -math.inf
    if lowered == "nan":
        return math.nan
    return float(text.rstrip("fF")) if not re.fullmatch(r"[-+]?\d+", text) else float(int(text))


def value(message: dict) -> Any:
    """A cel.expr.Value as the Python value the engine uses."""
    if "null_value" in message:
        return None
    if "bool_value" in message:
        return _one(message, "bool_value") == "true"
    if "int64_value" in message:
        return int(_one(message, "int64_value"))
    if "uint64_value" in message:
        return UInt(int(_one(message, "uint64_value")))
    if "double_value" in message:
        return _number(_one(message, "double_value"))
    if "string_value" in message:
        return _one(message, "string_value").decode("utf-8", "surrogatepass")
    if "bytes_value" in message:
        return _one(message, "bytes_value")
    if "list_value" in message:
        return [value(v) for v in _one(message, "list_value").get("values", [])]
    if "map_value" in message:
        out = {}
        for entry in _one(message, "map_value").get("entries", []):
            out[value(_one(entry, "key"))] = value(_one(entry, "value"))
        return out
    if "type_value" in message:
        name = _one(message, "type_value")
        if name in TYPES:
            return TYPES[name]
        raise Unrepresentable(f"type {name}")
    if "object_value" in message:
        raise Unrepresentable("a protobuf message value")
    if "enum_value" in message:
        raise Unrepresentable("an enum value")
    raise Unrepresentable(f"a value of kind {sorted(message)}")


_PROTO = ("TestAllTypes", "google.protobuf", "NestedTestAllTypes", "cel.expr.conformance", "GlobalEnum",
          "NestedEnum", "TestRequired", "proto2", "proto3")


def skip_reason(test: dict):
    """Why a conformance test cannot run on aiadmit's data model (JSON-shaped values, checked expressions), or None."""
    expr = test["expr"][0].decode()
    if "container" in test:
        return "needs a container (protobuf namespaces)"
    if "check_only" in test or "typed_result" in test:
        return "a type-check expectation (aiadmit checks declared variables, not protobuf types)"
    if "unknown" in test or "any_unknowns" in test:
        return "unknown sets"
    if test.get("disable_macros", ["false"])[0] == "true":
        return "macros disabled: not an option of aiadmit's environment"
    if any(name in expr for name in _PROTO):
        return "protobuf message or enum types"
    if "ip('::ffff:" in expr and "value" in test:
        return ("an IPv4-mapped IPv6 address as a value: cel-go's network extension accepts `::ffff:c0a8:1`, "
                "Kubernetes' ip() (k8s.io/apiserver ip.go, which aiadmit follows) rejects it")
    return None


def same_value(got: Any, expected: Any) -> bool:
    """Whether aiadmit's value is the expected one: the same type all the way down (4 is not 4.0), NaN equal to NaN,
    maps compared by CEL key, optionals by what they hold, types by name; the conformance run and the Kubernetes
    library cases judge with it."""
    from webhook.cel.runtime import Optional as Opt, equals

    if type(got) is not type(expected):
        return False
    if isinstance(got, float):
        return (math.isnan(got) and math.isnan(expected)) or got == expected
    if isinstance(got, list):
        return len(got) == len(expected) and all(same_value(x, y) for x, y in zip(got, expected))
    if isinstance(got, dict):
        return len(got) == len(expected) and all(
            any(same_value(k, j) and same_value(v, w) for j, w in expected.items()) for k, v in got.items())
    if isinstance(got, Opt):
        if None in (got.value, expected.value):
            return got.value is None and expected.value is None
        return same_value(got.value, expected.value)
    if type(got).__name__ == "CelType":
        return got.name == expected.name
    try:
        return bool(equals(got, expected))
    except Exception:  # noqa: BLE001 - values aiadmit cannot compare are not the same
        return False
