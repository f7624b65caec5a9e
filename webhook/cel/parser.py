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
    ("struct", type_name, ((field, value, optional), ...))   TypeName{field: value, ?field: optional}

Errors are ParseError with the column (1-based) where the parser stopped, the
same shape as the reference CEL library's reports.
"""

from __future__ import annotations

from typing import Any

from webhook.cel.lexer import INT64_MAX, INT64_MIN, UINT64_MAX, ParseError, UInt, RESERVED, tokenize

__all__ = ["INT64_MAX", "INT64_MIN", "UINT64_MAX", "ParseError", "UInt", "parse", "parse_with_positions"]


# Functions whose name has a namespace (cel-go's extensions): parsed as one global call, not a field selection.
_NAMESPACED = frozenset({"cel.bind", "strings.quote", "math.greatest", "math.least", "math.abs", "math.sign",
                         "math.ceil", "math.floor", "math.round", "math.trunc", "math.isNaN", "math.isInf",
                         "math.isFinite", "optional.of", "optional.none", "optional.ofNonZeroValue",
                         "sets.contains", "sets.equivalent", "sets.intersects", "math.bitAnd", "math.bitOr",
                         "math.bitXor", "math.bitNot", "math.bitShiftLeft", "math.bitShiftRight", "math.sqrt"})
# Kubernetes' namespaced functions (cel/k8slibs.py declares them) and qualified type names (`type(x) == net.IP`)
_NAMESPACED |= frozenset({"ip.isCanonical", "format.named", "jsonpatch.escapeKey", "lists.range"} | {
    f"format.{name}" for name in ("dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName",
                                  "dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue",
                                  "uri", "uuid", "byte", "date", "datetime")})
_QUALIFIED_TYPES = frozenset({"net.IP", "net.CIDR"})  # Kubernetes names no other of its types
_RELATIONS = ("==", "!=", "<", "<=", ">", ">=", "in")


_SORTED = ("ident", "@__sortBy_input__")  # `@` is in no CEL identifier: no name of the author's can be shadowed


def _sort_by(target: tuple, args: tuple, position: int, mark) -> tuple:
    """cel-go's lists macro `list.sortBy(e, key)` (Kubernetes 1.34), expanded as cel-go expands it:
    `cel.bind(@l, list, @l.@sortByAssociatedKeys(@l.map(e, key)))`, the list ordered by each element's key."""
    keys = mark(("call", "map", _SORTED, args), position)
    return ("call", "cel.bind", None, (_SORTED, target, mark(("call", "@sortByAssociatedKeys", _SORTED, (keys,)),
                                                              position)))


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.tokens = tokenize(source)
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
                    args = self.arguments()
                    node = self.mark(_sort_by(node, args, position, self.mark) if name == "sortBy" and len(args) == 2
                                     and args[0][0] == "ident" else ("call", name, node, args), position)
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
                name = _type_name(node)
                if name is None:
                    raise self.fail("a message is constructed from a type name, such as JSONPatch{...}")
                node = self.mark(("struct", name, self.fields()), self.positions.get(id(node), 0))
            else:
                return node

    def fields(self) -> tuple:
        """`{field: value, ?field: optional, ...}` of a message construction (CEL's `FieldInits`)."""
        self.expect("{")
        fields, seen = [], set()
        while not self.peek("}"):
            optional = self.peek("?")
            if optional:
                self.take()
            kind, name, position = self.take()
            if kind not in ("ident", "field") or not isinstance(name, str):
                raise ParseError(f"expected a field name, found {self._show(kind, name)}", self.source, position)
            if name in seen:
                raise ParseError(f"field {name!r} is set twice", self.source, position)
            seen.add(name)
            self.expect(":")
            fields.append((name, self.expr(), optional))
            if not self.peek(","):
                break
            self.take()
        self.expect("}")
        return tuple(fields)

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
            if value in RESERVED:
                raise ParseError(f"reserved identifier {value!r}", self.source, position)
            self.take()
            while self.peek(".") and self.tokens[self.at + 1][0] == "ident" and \
                    f"{value}.{self.tokens[self.at + 1][1]}" in _NAMESPACED and self.tokens[self.at + 2][1] == "(":
                self.take()  # `cel.bind(`, `strings.quote(`, `math.greatest(`, `optional.of(`: one function name
                value = f"{value}.{self.take()[1]}"
            if self.peek(".") and self.tokens[self.at + 1][0] == "ident" and \
                    f"{value}.{self.tokens[self.at + 1][1]}" in _QUALIFIED_TYPES:
                self.take()  # `net.IP`: one type name
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


def _type_name(node: tuple):
    """`A.b.c` as the dotted type name a message construction names, or None when `node` is not a plain name."""
    steps = []
    while node[0] == "select":
        steps.append(node[2])
        node = node[1]
    if node[0] != "ident":
        return None
    return ".".join([node[1]] + list(reversed(steps)))


def parse(source: str) -> tuple:
    """The tree of one CEL expression; ParseError (with the column) when it is not one."""
    return _Parser(source).parse()


def parse_with_positions(source: str) -> tuple[tuple, dict[int, int]]:
    """The tree and, by `id(node)`, the 0-based offset in `source` each node starts at (for the checker's reports).

    The ids are valid while the tree is alive: keep the tree with the table."""
    parser = _Parser(source)
    return parser.parse(), parser.positions
