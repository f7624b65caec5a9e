"""CEL's lexical grammar: the tokens of an expression, with string, bytes and number literals decoded.

Split from the parser (webhook/cel/parser.py) so each does one job: this module
knows characters and escapes, the parser knows the grammar.
"""

from __future__ import annotations

import re
from typing import Any

from webhook.cel.values import INT64_MAX, INT64_MIN, UINT64_MAX, ParseError, UInt  # noqa: F401 - re-exported

_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?P<prefix>[rR][bB]?|[bB][rR]?)?(?P<quote>'''|\"\"\"|'|"))
  | (?P<double>(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?))
  | (?P<hex>0[xX][0-9a-fA-F]+[uU]?)
  | (?P<int>\d+[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<quoted>`[A-Za-z0-9_.\-/ ]+`)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])
""", re.X)

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "?": "?", '"': '"', "'": "'", "`": "`"}
RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
             "package", "namespace", "return", "var", "void", "while"}


def tokenize(source: str) -> list[tuple[str, Any, int]]:
    tokens, position = [], 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise ParseError(f"unexpected character {source[position]!r}", source, position)
        kind = match.lastgroup
        if kind == "space":
            position = match.end()
            continue
        if match.group("string") is not None:
            value, end = _string(source, match.end(), match.group("prefix") or "", match.group("quote"), position)
            tokens.append(("lit", value, position))
            position = end
            continue
        text = match.group(0)
        if kind == "double":
            value = float(text)
            if value in (float("inf"), float("-inf")):
                raise ParseError("invalid double literal", source, position)
            tokens.append(("lit", value, position))
        elif kind in ("int", "hex"):
            unsigned = text[-1] in "uU"
            digits = text[:-1] if unsigned else text
            number = int(digits, 16) if kind == "hex" else int(digits)
            if unsigned:
                if number > UINT64_MAX:
                    raise ParseError("uint literal out of range", source, position)
                tokens.append(("lit", UInt(number), position))
            else:
                if number > INT64_MAX + 1:  # 2**63 is allowed only under a unary minus (checked by the parser)
                    raise ParseError("int literal out of range", source, position)
                tokens.append(("int", number, position))
        elif kind == "ident":
            if text in ("true", "false"):
                tokens.append(("lit", text == "true", position))
            elif text == "null":
                tokens.append(("lit", None, position))
            elif text == "in":
                tokens.append(("op", "in", position))
            else:
                tokens.append(("ident", text, position))  # a reserved word is a field name only (`x.namespace`)
        elif kind == "quoted":
            tokens.append(("quoted", text[1:-1], position))  # a field name in backticks: `content-type`
        else:
            tokens.append(("op", text, position))
        position = match.end()
    tokens.append(("end", None, len(source)))
    return tokens


def _string(source: str, start: int, prefix: str, quote: str, token_start: int) -> tuple[Any, int]:
    raw = "r" in prefix.lower()
    as_bytes = "b" in prefix.lower()
    out: list[str] = []
    position = start
    triple = len(quote) == 3
    while True:
        if position >= len(source):
            raise ParseError("unterminated string literal", source, token_start)
        if source.startswith(quote, position):
            position += len(quote)
            break
        char = source[position]
        if char == "\n" and not triple:
            raise ParseError("newline in a string literal", source, position)
        if char == "\\" and not raw:
            position, text = _escape(source, position, as_bytes)
            out.append(text)
            continue
        if char == "\\" and raw and position + 1 < len(source) and source[position + 1] == quote[0]:
            out.append(source[position:position + 2])  # a raw string keeps `\'`, and it does not end there
            position += 2
            continue
        out.append(char)
        position += 1
    text = "".join(out)
    return (_bytes(text) if as_bytes else text), position


def _bytes(text: str) -> bytes:
    """A bytes literal: characters as UTF-8, `\\xHH` and octal escapes (kept as U+DC80..U+DCFF) as single bytes."""
    out = bytearray()
    for char in text:
        if "\udc80" <= char <= "\udcff":
            out.append(ord(char) - 0xDC00)
        else:
            out.extend(char.encode("utf-8"))
    return bytes(out)


def _escape(source: str, position: int, as_bytes: bool) -> tuple[int, str]:
    """One backslash escape at `position`; returns the position after it and its text."""
    def octet(value: int) -> str:  # in bytes a byte; in a string a code point
        return chr(0xDC00 + value) if as_bytes and value >= 0x80 else chr(value)

    if position + 1 >= len(source):
        raise ParseError("unterminated escape", source, position)
    char = source[position + 1]
    if char in _ESCAPES:
        return position + 2, _ESCAPES[char]
    if char in "xX" and re.fullmatch(r"[0-9a-fA-F]{2}", source[position + 2:position + 4]):
        value = int(source[position + 2:position + 4], 16)
        return position + 4, octet(value)
    if char == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", source[position + 2:position + 6]):
        value = int(source[position + 2:position + 6], 16)
        if 0xD800 <= value <= 0xDFFF:
            raise ParseError("invalid unicode escape: a surrogate is not a character", source, position)
        return position + 6, chr(value)
    if char == "U" and re.fullmatch(r"[0-9a-fA-F]{8}", source[position + 2:position + 10]):
        value = int(source[position + 2:position + 10], 16)
        if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            raise ParseError("invalid unicode escape", source, position)
        return position + 10, chr(value)
    if char in "0123" and re.fullmatch(r"[0-7]{3}", source[position + 1:position + 4]):
        return position + 4, octet(int(source[position + 1:position + 4], 8))
    raise ParseError(f"invalid escape sequence \\{char}", source, position)
