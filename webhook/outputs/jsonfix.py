"""The fixer's JSON writer: a `.json` manifest stays JSON, with its key order, indentation and line breaks.

A YAML round trip of a JSON file writes YAML flow style (unquoted keys), which is
not JSON any more. Here the file's text is edited instead: the patched object is
compared with the original node tree, and each container that gained keys or
items gets them inserted as text just before its closing bracket, formatted the
way that container already is: one per line at its entries' indentation (the
same spaces or tabs, nested values indented by the file's own step, its line
ends), or inline after a comma. Nothing else of the file moves.

Only additions can be written this way (the engine's mutations only add); a
changed scalar or a removed key is an error and the file is left alone. The
caller reads the result back and compares it with the expected object.
"""

from __future__ import annotations

import json
from typing import Any

import yaml


class JsonEditError(ValueError):
    """The patched object is not the original plus additions: it cannot be written by insertion."""


def is_json(path: str, text: str) -> bool:
    """A file to keep as JSON: named .json, or whose content parses as JSON (a `.yaml` holding one JSON object)."""
    if path.endswith(".json"):
        return True
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _line_starts(text: str) -> list[int]:
    starts, offset = [0], 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        starts.append(offset)
    return starts


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


class _Editor:
    def __init__(self, text: str):
        self.text = text
        self.starts = _line_starts(text)
        self.newline = _newline(text)
        self.edits: list[tuple[int, str]] = []

    def leading(self, line: int) -> str:
        """The whitespace a line starts with (spaces or tabs, as the file has them)."""
        start = self.starts[line]
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        content = self.text[start:end]
        return content[:len(content) - len(content.lstrip(" \t"))]

    def closing(self, node) -> int:
        """Offset of the node's closing bracket."""
        end = self.starts[node.end_mark.line] + node.end_mark.column - 1
        if not 0 <= end < len(self.text) or self.text[end] not in "}]":
            raise JsonEditError(f"no closing bracket at line {node.end_mark.line + 1}")
        return end

    def insert(self, node, entries: list[tuple], keyed: bool) -> None:
        """Insert `entries` ((key, value) or (value,)) as the last entries of the flow container `node`, one per
        line at the indentation of its first entry when that entry has a line of its own, else inline."""
        children = node.value
        inner = unit = None
        if children:
            first = children[0][0] if keyed else children[0]
            if first.start_mark.line != node.start_mark.line:
                inner = self.leading(first.start_mark.line)
                outer = self.leading(node.start_mark.line)
                if len(inner) != first.start_mark.column or not inner.startswith(outer) or inner == outer:
                    inner = None  # an entry that does not start its line: write inline
                else:
                    unit = inner[len(outer):]
        pieces = [(f"{json.dumps(entry[0], ensure_ascii=False)}: " if keyed else "")
                  + json.dumps(entry[-1], ensure_ascii=False, indent=unit) for entry in entries]
        at = self.closing(node)
        while at > 0 and self.text[at - 1] in " \t\r\n":
            at -= 1
        if inner is not None:
            text = "".join(f",{self.newline}{inner}{piece.replace(chr(10), self.newline + inner)}" for piece in pieces)
        else:
            text = ("" if not children else ", ") + ", ".join(pieces)
        self.edits.append((at, text))

    def apply(self) -> str:
        text = self.text
        for at, insertion in sorted(self.edits, key=lambda edit: edit[0], reverse=True):
            text = text[:at] + insertion + text[at:]
        return text


def _walk(editor: _Editor, node, original: Any, expected: Any, where: str) -> None:
    if original == expected:
        return
    if isinstance(node, yaml.MappingNode) and isinstance(original, dict) and isinstance(expected, dict):
        missing = [key for key in original if key not in expected]
        if missing:
            raise JsonEditError(f"{where or '/'}: the patch removes {missing[0]!r}")
        for key_node, value_node in node.value:
            key = key_node.value
            if key in original:
                _walk(editor, value_node, original[key], expected[key], f"{where}/{key}")
        added = [(key, expected[key]) for key in expected if key not in original]
        if added:
            editor.insert(node, added, keyed=True)
        return
    if isinstance(node, yaml.SequenceNode) and isinstance(original, list) and isinstance(expected, list):
        if len(expected) < len(original):
            raise JsonEditError(f"{where or '/'}: the patch removes list items")
        for index, item in enumerate(node.value):
            _walk(editor, item, original[index], expected[index], f"{where}/{index}")
        extra = expected[len(original):]
        if extra:
            editor.insert(node, [(value,) for value in extra], keyed=False)
        return
    raise JsonEditError(f"{where or '/'}: the patch changes a value; only additions are written into JSON")


def rewrite(text: str, node, original: Any, expected: Any) -> str:
    """`text` (one JSON document whose composed node is `node` and value `original`) edited to hold `expected`."""
    if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) or node.flow_style is False:
        raise JsonEditError("not a JSON object or array")
    editor = _Editor(text)
    _walk(editor, node, original, expected, "")
    return editor.apply()
