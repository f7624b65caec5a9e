"""Where a character of an expression is in the policy file: line and column as the author sees them.

Why: an expression's error has an offset in the string YAML produced (folded,
unquoted, unescaped), and the author edits the file. The value is aligned
with the raw text of its scalar node character by character, skipping what
YAML removed (indentation, line breaks of a folded block, quotes, escapes), so
`policies/x.yaml:41:17` points at the very character the checker stopped on.
"""

from __future__ import annotations

from typing import Optional

import yaml

from webhook.model import pointer as jp
from webhook.model.yamlkeys import entry


def _node(node: yaml.Node, pointer: str) -> Optional[yaml.Node]:
    for token in jp.split(pointer):
        if isinstance(node, yaml.MappingNode):
            found = entry(node, token)
            if found is None:
                return None
            node = found[1]
        elif isinstance(node, yaml.SequenceNode) and token.isdigit() and int(token) < len(node.value):
            node = node.value[int(token)]
        else:
            return None
    return node


def _index(text: str, line: int, column: int) -> int:
    position = 0
    for _ in range(line):
        position = text.index("\n", position) + 1
    return position + column


def locate(node: Optional[yaml.Node], base: str, pointer: str, value: str, offset: int,
           text: Optional[str]) -> Optional[tuple[int, int]]:
    """1-based (line, column) of `value[offset]` in the file `text`, or None when it cannot be placed."""
    if node is None or text is None:
        return None
    scalar = _node(node, base + pointer)
    if not isinstance(scalar, yaml.ScalarNode) or scalar.value != value:
        return None
    try:
        start = _index(text, scalar.start_mark.line, scalar.start_mark.column)
        end = _index(text, scalar.end_mark.line, scalar.end_mark.column)
    except ValueError:
        return None
    raw = start
    if scalar.style in ("|", ">"):
        raw = text.index("\n", start) + 1  # the block starts on the line after its indicator
    elif scalar.style in ("'", '"'):
        raw += 1
    offset = min(max(offset, 0), len(value))
    while offset < len(value) and value[offset].isspace():
        offset += 1  # a blank has no place of its own in a folded text: the next character's
    for char in value[:offset + 1] if offset < len(value) else value:
        if char.isspace():
            continue
        while raw < end and text[raw] != char:
            raw += 1
        if raw >= end:
            return None
        raw += 1
    raw = raw - 1 if offset < len(value) else raw
    line = text.count("\n", 0, raw)
    column = raw - (text.rfind("\n", 0, raw) + 1)
    return line + 1, column + 1
