"""A YAML map key as Kubernetes spells it: always a string, exactly as sigs.k8s.io/yaml makes it one.

kubectl and the API server read YAML with sigs.k8s.io/yaml (v1.6.0 over go.yaml.in/yaml/v2 v2.4.4): go-yaml v2
resolves a plain key by its own YAML 1.1 rules, then YAMLToJSON turns each key into a JSON string (JSON has no
other). PyYAML's rules differ at the edges (`y`, `08`, `0o17`, `1e3`, `1:30`, dates), and a key left an int, bool
or None in aiadmit's object was simply not found by a walk over names: `pytorchReplicaSpecs: {1: {...}}` or
`yes: {...}` hid a pod template from every rule. What Kubernetes does (measured with tests/tools/yamljson, which
tests/test_yaml_keys.py compares with this module):

- a plain key is resolved as go-yaml v2 does (`resolve.go`): `y Y yes Yes YES true True TRUE on On ON` are true,
  `n N no ... off` false, `~ null Null NULL` and the empty key null; `.inf`-style specials; a key starting with a
  digit or sign is, with `_` dropped, an int in Go's base-0 syntax (`0x1F`, `0o17`, `017` octal, `0b101`), else
  an unsigned int past int64, else a float (`1e3`, `08`), else (after an odd `0b` retry) the text itself; a key
  starting with `.` a float by Go's ParseFloat; dates and sexagesimal (`1:30`) stay the text as written;
- the key then becomes a string (sigs.k8s.io/yaml `convertToJSONableObject`): an int in decimal, a bool `true` or
  `false`, a float as Go's `FormatFloat(f, 'g', -1, 32)` (float32 precision: `3.1415927`, `1e+06`) with `.inf`,
  `-.inf`, `.nan` for the specials;
- and it is refused (YAMLToJSON fails, kubectl and the API server reject the document) for a null key, an
  unsigned key past int64 (`unsupported map key of type: uint64`) and a sequence or map as a key (`invalid map
  key`). Those raise KeyRefused here, with the key's position.

A quoted key is its text. A key with a tag or an anchor: an explicit tag decides (`!!str y` is "y", `!!int "1"` is
"1"), an anchor does not (`&a y` is "true"); PyYAML's nodes do not say which of the two a plain `str` key had, so
where the two readings differ the key is refused (quote it) rather than guessed. (aiadmit's loader tags a plain
`y`/`n`, anchored or not, bool as go-yaml does: webhook/inputs/sources.py; so `&a y` is "true", `!!str y` refused.)
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from typing import Any, Callable, Optional

import yaml

_STR = "tag:yaml.org,2002:str"
# PyYAML's implicit tags (`value`: its reading of a plain `=`); a plain key with one of these is go-yaml's to resolve
_IMPLICIT = frozenset("tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "timestamp", "value"))
NUMBER_FIRST = frozenset("+-.0123456789")  # go-yaml's resolve hints 'S', 'D' and '.'
YN = frozenset(("y", "Y", "n", "N"))  # booleans to go-yaml v2, strings to PyYAML
_GO_WORDS = {**dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), "true"),
             **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), "false"),
             **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
             **dict.fromkeys((".nan", ".NaN", ".NAN"), ".nan"),
             **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), ".inf"),
             **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), "-.inf")}
_GO_INT = r"([+-]?)(?:0[xX]([0-9a-fA-F]+)|0[bB]([01]+)|0[oO]([0-7]+)|(0[0-7]*)|([1-9][0-9]*))\Z"
_GO_FLOAT = r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z"  # go-yaml's yamlStyleFloat
_GO_DOT_FLOAT = r"\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?\Z"  # ParseFloat's, from a '.'
_BINARY = r"([+-]?)([01]+)\Z"
_INT64 = 1 << 63  # (the patterns are compiled by `re` at their first use: most runs never spell a key)


class KeyRefused(yaml.MarkedYAMLError):
    """A map key that Kubernetes' YAML reader refuses (or that aiadmit cannot read as it would): an input error."""

    def __init__(self, problem: str, mark):
        super().__init__(problem=problem, problem_mark=mark)


def scalar_key(node: yaml.Node) -> Any:
    """PyYAML's value of a key with an explicit tag (`!!int "1"`), for key_name to spell."""
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


def spelt_as(node: yaml.Node, name: str) -> bool:
    """Whether a key node is the key `name` of the object read from it (positions: a pointer's step to its node)."""
    if type(node) is yaml.ScalarNode and node.tag == _STR and (node.style or not (
            node.value[:1] in NUMBER_FIRST or node.value in YN)):
        return node.value == name
    try:
        return key_name(node, scalar_key) == name
    except (KeyRefused, yaml.YAMLError, ValueError, TypeError):
        return False


def plain_is_text(text: str) -> bool:
    """Whether `text` written as a plain key reads back as itself (`y`, `08`, `1e3` do not: a writer quotes them)."""
    try:
        return _go_plain(text, yaml.ScalarNode(_STR, text)) == text
    except KeyRefused:
        return False


def entry(mapping: yaml.MappingNode, name: str) -> Optional[tuple[yaml.Node, yaml.Node]]:
    """The (key, value) nodes of the key `name` of the object read from `mapping`, or None.

    Keys are looked up by their text (one spelling check, on the key that matches); they are spelt one by one only
    in a map the reader marked (`mark_spelt`: one of its keys is not named by its text), so a position look-up costs
    what it did before keys were spelt (bench/RESULTS.md, 2026-12-07)."""
    for pair in mapping.value:
        if pair[0].value == name and spelt_as(pair[0], name):
            return pair
    if getattr(mapping, SPELT, False):
        for pair in mapping.value:
            if spelt_as(pair[0], name):
                return pair
    return None


SPELT = "aiadmit_spelt_keys"


def mark_spelt(mapping: yaml.MappingNode) -> None:
    """Note on a map node that a key of it was spelt (`1:` is "1"): `entry` then spells its keys to find one."""
    setattr(mapping, SPELT, True)


def key_name(node: yaml.Node, construct: Optional[Callable[[yaml.Node], Any]] = None) -> str:
    """The string Kubernetes makes of a map key node, or KeyRefused. `construct` builds PyYAML's value of a key with
    an explicit tag (`!!int "1"`); without it such a key is refused as unreadable."""
    if not isinstance(node, yaml.ScalarNode):
        what = "sequence" if isinstance(node, yaml.SequenceNode) else "map"
        raise KeyRefused(f"a {what} as a map key: Kubernetes' YAML reader (sigs.k8s.io/yaml) refuses it "
                         f"(invalid map key)", node.start_mark)
    text, tag = node.value, node.tag
    if tag == _STR and (node.style or not (text[:1] in NUMBER_FIRST or text in YN)):
        return text
    if not node.style and tag in _IMPLICIT:
        bare = node.end_mark.index - node.start_mark.index == len(text)  # no tag or anchor before it
        if bare or tag != _STR:
            return _go_plain(text, node)
        try:
            name = _go_plain(text, node)
        except KeyRefused:
            name = None
        if name != text:
            raise KeyRefused(f"key {text!r} has a tag or an anchor: Kubernetes reads it as {text!r} with `!!str` "
                             f"but as {'null' if name is None else repr(name)} with an anchor; quote it",
                             node.start_mark)
        return text
    if tag == _STR:
        return text
    if construct is None:
        raise KeyRefused(f"a map key tagged {tag}: not read here", node.start_mark)
    return _spelt(construct(node), node)


def _go_plain(text: str, node: yaml.Node) -> str:
    """go-yaml v2's `resolve` of an untagged plain scalar, spelt as YAMLToJSON spells a key."""
    if text in _GO_WORDS:
        name = _GO_WORDS[text]
        if name is None:
            raise KeyRefused(f"null map key {text or '(empty)'!r}: Kubernetes' YAML reader (sigs.k8s.io/yaml) refuses "
                             f"it (unsupported map key); quote it if the text is meant", node.start_mark)
        return name
    first = text[:1]
    if first == ".":
        if re.match(_GO_DOT_FLOAT, text):
            return _go_float(float(text.replace("_", "")), node)
        return text
    if not first or first not in NUMBER_FIRST:
        return text
    plain = text.replace("_", "")
    match = re.match(_GO_INT, plain)
    if match:
        sign, hexa, binary, octal, zero, decimal = match.groups()
        value = (int(hexa, 16) if hexa else int(binary, 2) if binary else int(octal, 8) if octal
                 else int(zero, 8) if zero else int(decimal))
        value = -value if sign == "-" else value
        if -_INT64 <= value < _INT64:
            return str(value)
        if sign == "" and value < 2 * _INT64:
            raise _unsigned(text, node)
    if re.match(_GO_FLOAT, plain):
        value = float(plain)
        if not math.isinf(value):  # ParseFloat's range error: go-yaml goes on
            return _go_float(value, node)
    if plain.startswith("0b") or plain.startswith("-0b"):
        match = re.match(_BINARY, plain[2:] if plain[0] == "0" else "-" + plain[3:])
        if match:
            value = int(match.group(2), 2) * (-1 if match.group(1) == "-" else 1)
            if -_INT64 <= value < _INT64:
                return str(value)
            if match.group(1) == "" and plain[0] == "0" and value < 2 * _INT64:
                raise _unsigned(text, node)
    return text


def _unsigned(text: str, node: yaml.Node) -> KeyRefused:
    return KeyRefused(f"map key {text} is past int64: Kubernetes' YAML reader (sigs.k8s.io/yaml) refuses it "
                      f"(unsupported map key of type uint64); quote it", node.start_mark)


def _spelt(value: Any, node: yaml.Node) -> str:
    """A key with an explicit tag, from PyYAML's value of it, spelt as YAMLToJSON spells go-yaml's."""
    if value is None:
        raise KeyRefused("null map key: Kubernetes' YAML reader (sigs.k8s.io/yaml) refuses it (unsupported map key)",
                         node.start_mark)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if -_INT64 <= value < _INT64:
            return str(value)
        raise KeyRefused(f"map key {value} is past int64: Kubernetes' YAML reader refuses it", node.start_mark)
    if isinstance(value, float):
        return _go_float(value, node)
    if isinstance(value, (dt.date, dt.datetime)):
        return node.value  # go-yaml keeps a timestamp read into interface{} as the text written
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            pass
    raise KeyRefused(f"a map key tagged {node.tag}: Kubernetes' YAML reader gives it no JSON name here",
                     node.start_mark)


def _go_float(value: float, node: yaml.Node) -> str:
    """Go's strconv.FormatFloat(value, 'g', -1, 32): the shortest decimal that reads back as the same float32."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:  # Go's float32() conversion gives an infinity
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    sign = "-" if math.copysign(1.0, single) < 0 else ""
    if single == 0:
        return sign + "0"
    for precision in range(9):
        text = f"{abs(single):.{precision}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == abs(single):
            break
    mantissa, exponent = text.split("e")
    digits, exp = mantissa.replace(".", "").rstrip("0") or "0", int(exponent)
    if exp < -4 or exp >= 6:  # Go's %e/%f choice for the shortest form ("eprec = 6")
        tail = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    point = exp + 1  # digits before the decimal point
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"
