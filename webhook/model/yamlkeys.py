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

A quoted key is its text, and so is a key tagged `!!str` (`!!str y` is "y"). Another tag decides as go-yaml
decides (`!!int "1"` is "1", `!!int 08` refused: go-yaml reads `08` as a float), an anchor does not (`&a y` is
"true"): aiadmit's loader resolves every plain scalar as go-yaml does (webhook/model/goyaml.py), so a node's tag
is go-yaml's and a key tagged `str` is always its text.
"""

from __future__ import annotations

import math
import struct
from typing import Any, Optional

import yaml

from webhook.model.goyaml import BOOL, CORE, FLOAT, INT, INT64 as _INT64, NULL, STR as _STR, Refused, \
    resolve, tagged


class KeyRefused(yaml.MarkedYAMLError):
    """A map key that Kubernetes' YAML reader refuses (or that aiadmit cannot read as it would): an input error."""

    def __init__(self, problem: str, mark):
        super().__init__(problem=problem, problem_mark=mark)


def spelt_as(node: yaml.Node, name: str) -> bool:
    """Whether a key node is the key `name` of the object read from it (positions: a pointer's step to its node)."""
    if type(node) is yaml.ScalarNode and node.tag == _STR:
        return node.value == name
    try:
        return key_name(node) == name
    except (KeyRefused, yaml.YAMLError, ValueError, TypeError):
        return False


def plain_is_text(text: str) -> bool:
    """Whether `text` written as a plain key reads back as itself (`y`, `08`, `1e3` do not: a writer quotes them)."""
    try:
        return _spelt(*resolve(text), yaml.ScalarNode(_STR, text)) == text
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


def key_name(node: yaml.Node) -> str:
    """The string Kubernetes makes of a map key node, or KeyRefused."""
    if not isinstance(node, yaml.ScalarNode):
        what = "sequence" if isinstance(node, yaml.SequenceNode) else "map"
        raise KeyRefused(f"a {what} as a map key: Kubernetes' YAML reader (sigs.k8s.io/yaml) refuses it "
                         f"(invalid map key)", node.start_mark)
    text, tag = node.value, node.tag
    if tag == _STR or tag not in CORE:  # quoted, `!!str`, a plain string to go-yaml; a tag it does not resolve
        return text
    try:
        return _spelt(*tagged(tag, text), node)
    except Refused as exc:
        raise KeyRefused(f"map key {text!r}: {exc}", node.start_mark) from None


def _spelt(tag: str, value: Any, node: yaml.Node) -> str:
    """go-yaml's (tag, value) of a key, spelt as YAMLToJSON spells it."""
    if tag == NULL:
        raise KeyRefused(f"null map key {node.value or '(empty)'!r}: Kubernetes' YAML reader (sigs.k8s.io/yaml) "
                         f"refuses it (unsupported map key); quote it if the text is meant", node.start_mark)
    if tag == BOOL:
        return "true" if value else "false"
    if tag == INT:
        if value < _INT64:
            return str(value)
        raise KeyRefused(f"map key {node.value} is past int64: Kubernetes' YAML reader (sigs.k8s.io/yaml) refuses "
                         f"it (unsupported map key of type uint64); quote it", node.start_mark)
    if tag == FLOAT:
        return _go_float(value, node)
    return value  # a string: the text, a timestamp's text, a !!binary's bytes as Go's JSON writes them; `<<`


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
