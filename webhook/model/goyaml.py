"""A YAML scalar as Kubernetes reads it: go-yaml v2's `resolve`, then the JSON value the API server decodes.

kubectl and the API server read YAML with sigs.k8s.io/yaml v1.6.0 over go.yaml.in/yaml/v2 v2.4.4: go-yaml resolves a
plain scalar by its own YAML 1.1 rules (resolve.go), sigs.k8s.io/yaml writes the result as JSON, and apimachinery's
JSON decoder reads a number back as an int64 when its JSON text is one, else as a float64 (util/json
`convertNumber`). PyYAML's YAML 1.1 differs at the edges (`0o10`, `08` and `1e3` are strings to it, `1:30` is 90,
`2001-12-14` a date), and a value read otherwise is not the object that will run. What this module does, measured
with tests/tools/yamljson (tests/test_yaml_plain.py compares every form with it):

- `resolve(text)`: the tag and value go-yaml gives a plain scalar: its words (`y`, `yes`, `on`, `~`, `Null`, the
  empty scalar, `.inf`, `.NaN`, ...); a scalar starting with `.` a float by Go's ParseFloat; one starting with a
  digit or sign, `_` dropped, an int in Go's base-0 syntax (`0x1F`, `0o17`, `017` octal, `0b101`), else an
  unsigned int past int64, else a float (`1e3`, `08`, `+.5`), else (after an odd `0b` retry) the text itself, as
  for dates and sexagesimal (`1:30`). An unsigned past int64 comes back as an int >= 2**63 (keys refuse it).
- `tagged(tag, text)`: go-yaml's reading of a scalar with an explicit tag (`!!int "8"`, `!!float 1`): the text
  must resolve to the tag (an int is a float's too), else go-yaml's error; `!!str` any text; `!!binary` base64.
- `json_value(tag, value)`: the value as the API server holds it: a float that JSON writes as an integer (`1.0`,
  `1e3`) is that int, an int past int64 a float (`99999999999999999999` is 1e+20), and an infinity or NaN refused:
  JSON has none, so sigs.k8s.io/yaml refuses the document.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import datetime as dt
import math
import re
from typing import Any

_P = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = _P + "str", _P + "int", _P + "float", _P + "bool", _P + "null"
TIMESTAMP, BINARY, MERGE = _P + "timestamp", _P + "binary", _P + "merge"
CORE = frozenset((STR, INT, FLOAT, BOOL, NULL, TIMESTAMP, BINARY))  # the tags go-yaml resolves (and !!binary)
NUMBER_FIRST = frozenset("+-.0123456789")  # go-yaml's resolve hints 'S', 'D' and '.'
INT64 = 1 << 63

WORDS: dict[str, tuple[str, Any]] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), (BOOL, True)),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), (BOOL, False)),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), (FLOAT, math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (FLOAT, math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (FLOAT, -math.inf)),
    "<<": (MERGE, "<<"),
}
_GO_INT = (r"([+-]?)(?:0[xX]([0-9a-fA-F]+)|0[bB]([01]+)|0[oO]([0-7]+)|(0[0-7]*)|([1-9][0-9]*))\Z")
_GO_FLOAT = (r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")  # go-yaml's yamlStyleFloat
_GO_DOT_FLOAT = (r"\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?\Z")  # ParseFloat's, from a '.'
_BINARY = (r"([+-]?)([01]+)\Z")  # (compiled by `re` at first use: an import compiles none)
# go-yaml's timestamp layouts (time.Parse: "2006-1-2T15:4:5.999999999Z07:00", its `t` twin, "2006-1-2
# 15:4:5.999999999", "2006-1-2"), checked only under an explicit !!timestamp: a plain one is its text anyway
_TIMESTAMP = (r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?"
                        r"(?:Z|[+-](\d{2}):(\d{2}))|[ ](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.\d+)?)?\Z")


class Refused(ValueError):
    """A scalar Kubernetes' YAML reader refuses: the reason, for the reader to place at the node."""


def resolve(text: str) -> tuple[str, Any]:
    """go-yaml v2's (tag, value) of an untagged plain scalar (a timestamp is STR: go-yaml keeps its text)."""
    word = WORDS.get(text)
    if word is not None:
        return word
    first = text[:1]
    if first == ".":
        if re.match(_GO_DOT_FLOAT, text):
            return FLOAT, float(text.replace("_", ""))
        return STR, text
    if not first or first not in NUMBER_FIRST:
        return STR, text
    plain = text.replace("_", "")
    match = re.match(_GO_INT, plain)
    if match:
        sign, hexa, binary, octal, zero, decimal = match.groups()
        if len((hexa or binary or octal or zero or decimal).lstrip("0")) <= 64:  # else past uint64 in any base
            value = (int(hexa, 16) if hexa else int(binary, 2) if binary else int(octal, 8) if octal
                     else int(zero, 8) if zero else int(decimal))
            value = -value if sign == "-" else value
            if -INT64 <= value < INT64 or (sign == "" and value < 2 * INT64):
                return INT, value  # past int64: ParseUint's uint64 (an unsigned literal only)
    if re.match(_GO_FLOAT, plain):
        value = float(plain)
        if not math.isinf(value):  # ParseFloat's range error: go-yaml goes on
            return FLOAT, value
    if plain.startswith("0b") or plain.startswith("-0b"):
        match = re.match(_BINARY, plain[2:] if plain[0] == "0" else "-" + plain[3:])
        if match:
            value = int(match.group(2), 2) * (-1 if match.group(1) == "-" else 1)
            if -INT64 <= value < INT64 or (match.group(1) == "" and plain[0] == "0" and value < 2 * INT64):
                return INT, value
    return STR, text


def tagged(tag: str, text: str) -> tuple[str, Any]:
    """go-yaml v2's (tag, value) of a scalar with an explicit core tag, or Refused with go-yaml's reason."""
    if tag == STR:
        return STR, text
    if tag == BINARY:
        try:
            data = base64.b64decode(text.replace("\n", "").replace("\r", ""), validate=True)
        except (binascii.Error, ValueError):
            raise Refused("!!binary value contains invalid base64 data") from None
        return STR, data.decode("utf-8", "aiadmit-go-utf8")
    if tag == TIMESTAMP:
        if _timestamp(text):
            return STR, text
        found, _ = resolve(text)
    else:
        found, value = resolve(text)
        if found == tag:
            return found, value
        if tag == FLOAT and found == INT and -INT64 <= value < INT64:
            return FLOAT, float(value)
    found = TIMESTAMP if found == STR and _timestamp(text) else found
    raise Refused(f"cannot decode !!{found[len(_P):]} `{text}` as a !!{tag[len(_P):]}")


def json_value(tag: str, value: Any) -> Any:
    """The value of go-yaml's (tag, value) once sigs.k8s.io/yaml wrote it as JSON and the API server read it."""
    if tag == INT:
        return value if -INT64 <= value < INT64 else float(value)  # a uint64's JSON text is no int64
    if tag == FLOAT:
        if math.isinf(value) or math.isnan(value):
            raise Refused(f"{'NaN' if math.isnan(value) else 'an infinity'} is no JSON number: Kubernetes' YAML "
                          f"reader (sigs.k8s.io/yaml) refuses the document (json: unsupported value); quote it if "
                          f"the text is meant")
        if value.is_integer():  # Go's JSON writes it as its shortest digits, no point: an int64 if in range
            if abs(value) < 2 ** 53:
                exact = int(value)
            else:  # rare: decimal (with numbers) is imported here, not by every run that reads YAML
                import decimal

                exact = int(decimal.Decimal(repr(value)))
            if -INT64 <= exact < INT64:
                return exact
        return value
    return value


def _timestamp(text: str) -> bool:
    match = re.match(_TIMESTAMP, text)
    if not match:
        return False
    year, month, day, hour, minute, second, zone_h, zone_m, hour2, minute2, second2 = (
        int(g) if g else 0 for g in match.groups())
    hour, minute, second = (hour2, minute2, second2) if match.group(9) else (hour, minute, second)
    try:
        dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return False
    return zone_h < 24 and zone_m < 60


def _per_byte(error: UnicodeDecodeError) -> tuple[str, int]:
    """Go's reading of bad UTF-8 in a string it writes as JSON: one U+FFFD per invalid byte."""
    return "\ufffd", error.start + 1


codecs.register_error("aiadmit-go-utf8", _per_byte)
