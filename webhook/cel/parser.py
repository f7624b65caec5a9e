"""A parser for CEL expressions (the grammar of the CEL specification), into a small tuple tree.

The tree is what webhook/cel/compiler.py compiles into Python closures. Nodes are
tuples whose first item names them:

    ("lit", value)                  null, bool, int, uint, double, string, bytes
    ("ident", name)
    ("select", operand, field)      operand.field
    ("index", operand, index)       operand[index]
    ("call", name, target, args)    name(args) or target.name(args); target is None for a global call
    ("list", items) / ("map", ((key, value), ...))
    ("not", operand) / ("neg", operand)
    ("binary", op, left, right)     op in == != < <= > >= in + - * / %
    ("and", operands) / ("or", operands)   flattened chains
    ("cond", test, if_true, if_false)

Errors are ParseError with the column (1-based) where the parser stopped, the
same shape as the reference CEL library's reports.
"""

from __future__ import annotations

import re
from typing import Any

INT64_MIN, INT64_MAX, UINT64_MAX = -(2 ** 63), 2 ** 63 - 1, 2 ** 64 - 1


class UInt(int):
    """A CEL uint: a Python int that remembers its type (`1u`)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class ParseError(ValueError):
    def __init__(self, message: str, source: str, position: int):
        self.column = position + 1
        super().__init__(f"{message} at column {self.column} of {source!r}")


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
_RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
             "package", "namespace", "return", "var", "void", "while"}


def _tokenize(source: str) -> list[tuple[str, Any, int]]:
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


# Functions whose name has a namespace (cel-go's extensions): parsed as one global call, not a field selection.
_NAMESPACED = frozenset({"cel.bind", "strings.quote", "math.greatest", "math.least", "math.abs", "math.sign",
                         "math.ceil", "math.floor", "math.round", "math.trunc", "math.isNaN", "math.isInf",
                         "math.isFinite", "optional.of", "optional.none", "optional.ofNonZeroValue",
                         "sets.contains", "sets.equivalent", "sets.intersects", "math.bitAnd", "math.bitOr",
                         "math.bitXor", "math.bitNot", "math.bitShiftLeft", "math.bitShiftRight", "math.sqrt"})
_RELATIONS = ("==", "!=", "<", "<=", ">", ">=", "in")


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.tokens = _tokenize(source)
        self.at = 0
        self.depth = 0
        self.positions: dict[int, int] = {}  # id(node) -> offset in the source: what the checker reports

    def mark(self, node: tuple, position: int) -> tuple:
        self.positions.setdefault(id(node), position)
        return node

    def peek(self, *values: str) -> bool:
        kind, value, _ = self.tokens[self.at]
        return kind == "op" and value in values

    def take(self) -> tuple[str, Any, int]:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def expect(self, value: str) -> None:
        kind, found, position = self.take()
        if kind != "op" or found != value:
            raise ParseError(f"expected {value!r}, found {self._show(kind, found)}", self.source, position)

    @staticmethod
    def _show(kind: str, value: Any) -> str:
        return "the end" if kind == "end" else repr(value)

    def fail(self, message: str) -> ParseError:
        kind, value, position = self.tokens[self.at]
        return ParseError(f"{message}, found {self._show(kind, value)}", self.source, position)

    def parse(self) -> tuple:
        node = self.expr()
        if self.tokens[self.at][0] != "end":
            raise self.fail("expected the end of the expression")
        return node

    def expr(self) -> tuple:
        self.depth += 1
        if self.depth > 250:
            raise self.fail("expression nested too deeply")
        node = self.logical("||", "or", self.conditional_and)
        if self.peek("?"):
            position = self.take()[2]
            if_true = self.logical("||", "or", self.conditional_and)
            self.expect(":")
            node = self.mark(("cond", node, if_true, self.expr()), position)
        self.depth -= 1
        return node

    def conditional_and(self) -> tuple:
        return self.logical("&&", "and", self.relation)

    def logical(self, op: str, name: str, operand) -> tuple:
        nodes = [operand()]
        position = None
        while self.peek(op):
            taken = self.take()[2]
            position = taken if position is None else position
            nodes.append(operand())
        return nodes[0] if len(nodes) == 1 else self.mark((name, tuple(nodes)), position)

    def relation(self) -> tuple:
        node = self.addition()
        while self.peek(*_RELATIONS):
            _, op, position = self.take()
            node = self.mark(("binary", op, node, self.addition()), position)
        return node

    def addition(self) -> tuple:
        node = self.multiplication()
        while self.peek("+", "-"):
            _, op, position = self.take()
            node = self.mark(("binary", op, node, self.multiplication()), position)
        return node

    def multiplication(self) -> tuple:
        node = self.unary()
        while self.peek("*", "/", "%"):
            _, op, position = self.take()
            node = self.mark(("binary", op, node, self.unary()), position)
        return node

    def unary(self) -> tuple:
        if self.peek("!"):
            count, position = 0, self.tokens[self.at][2]
            while self.peek("!"):
                self.take()
                count += 1
            node = self.member()
            for _ in range(count):
                node = self.mark(("not", node), position)
            return node
        if self.peek("-"):
            count, start = 0, self.tokens[self.at][2]
            while self.peek("-"):
                self.take()
                count += 1
            if self.tokens[self.at][0] == "int":  # fold `-1` so that -9223372036854775808 is a literal
                _, number, position = self.take()
                value = -number
                if value < INT64_MIN:
                    raise ParseError("int literal out of range", self.source, position)
                node = self.postfix(self.mark(("lit", value), start))
                count -= 1
            else:
                node = self.member()
            for _ in range(count):
                node = self.mark(("neg", node), start)
            return node
        return self.member()

    def member(self) -> tuple:
        return self.postfix(self.primary())

    def postfix(self, node: tuple) -> tuple:
        while True:
            if self.peek("."):
                self.take()
                optional = self.peek("?")
                if optional:
                    self.take()
                kind, name, position = self.take()
                if kind == "quoted":
                    kind = "field"
                if kind == "field":
                    node = self.mark((("optselect" if optional else "select"), node, name), position)
                    continue
                if kind != "ident":
                    raise ParseError(f"expected a field name, found {self._show(kind, name)}", self.source, position)
                if optional:
                    node = self.mark(("optselect", node, name), position)
                elif self.peek("("):
                    node = self.mark(("call", name, node, self.arguments()), position)
                else:
                    node = self.mark(("select", node, name), position)
            elif self.peek("["):
                position = self.take()[2]
                optional = self.peek("?")
                if optional:
                    self.take()
                index = self.expr()
                self.expect("]")
                node = self.mark((("optindex" if optional else "index"), node, index), position)
            elif self.peek("{"):
                raise self.fail("message construction is not supported")
            else:
                return node

    def arguments(self) -> tuple:
        self.expect("(")
        args = []
        if not self.peek(")"):
            args.append(self.expr())
            while self.peek(","):
                self.take()
                args.append(self.expr())
        self.expect(")")
        return tuple(args)

    def primary(self) -> tuple:
        kind, value, position = self.tokens[self.at]
        if kind == "lit":
            self.take()
            return self.mark(("lit", value), position)
        if kind == "int":
            self.take()
            if value > INT64_MAX:
                raise ParseError("int literal out of range", self.source, position)
            return self.mark(("lit", value), position)
        if kind == "ident":
            if value in _RESERVED:
                raise ParseError(f"reserved identifier {value!r}", self.source, position)
            self.take()
            while self.peek(".") and self.tokens[self.at + 1][0] == "ident" and \
                    f"{value}.{self.tokens[self.at + 1][1]}" in _NAMESPACED and self.tokens[self.at + 2][1] == "(":
                self.take()  # `cel.bind(`, `strings.quote(`, `math.greatest(`, `optional.of(`: one function name
                value = f"{value}.{self.take()[1]}"
            if self.peek("("):
                return self.mark(("call", value, None, self.arguments()), position)
            return self.mark(("ident", value), position)
        if kind == "op" and value == ".":
            raise self.fail("a leading-dot identifier is not supported")
        if kind == "op" and value == "(":
            self.take()
            node = self.expr()
            self.expect(")")
            return node
        if kind == "op" and value == "[":
            self.take()
            items = []
            while not self.peek("]"):
                if self.peek("?"):  # `[?x]`: the element only when the optional x has a value
                    where = self.take()[2]
                    items.append(self.mark(("optitem", self.expr()), where))
                else:
                    items.append(self.expr())
                if not self.peek(","):
                    break
                self.take()
            self.expect("]")
            return self.mark(("list", tuple(items)), position)
        if kind == "op" and value == "{":
            self.take()
            entries = []
            while not self.peek("}"):
                if self.peek("?"):  # `{?k: v}`: the entry only when the optional v has a value
                    where = self.take()[2]
                    key = self.mark(("optitem", self.expr()), where)
                else:
                    key = self.expr()
                self.expect(":")
                entries.append((key, self.expr()))
                if not self.peek(","):
                    break
                self.take()
            self.expect("}")
            return self.mark(("map", tuple(entries)), position)
        raise self.fail("expected an expression")


def parse(source: str) -> tuple:
    """The tree of one CEL expression; ParseError (with the column) when it is not one."""
    return _Parser(source).parse()


def parse_with_positions(source: str) -> tuple[tuple, dict[int, int]]:
    """The tree and, by `id(node)`, the 0-based offset in `source` each node starts at (for the checker's reports).

    The ids are valid while the tree is alive: keep the tree with the table."""
    parser = _Parser(source)
    return parser.parse(), parser.positions
