"""CEL's parsed tree turned into the statements of a Python function: the generator behind cel/compiler.py.

Split from cel/compiler.py, which runs a program (recalled from the command line's cache, cel/stored.py, or made
here), so that a run whose programs were all generated before imports no parser, folding or generator mixins
(bench/RESULTS.md, 2026-12-07, h-warm). The semantics are those cel/compiler.py describes.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional

from webhook.cel import fastpaths, messages, named
from webhook.cel import sums
from webhook.cel.comprehensions import Comprehensions
from webhook.cel.folding import fold
from webhook.cel.logic import Logic, is_name
from webhook.cel.named import variable_tree
from webhook.cel.namespace import BUILTINS
from webhook.cel.tree import resolve
from webhook.cel.parser import parse
from webhook.cel.runtime import TYPES, Unsupported

_MACROS = ("all", "exists", "exists_one", "existsOne", "map", "filter")


def generate(source: str, functions: Mapping[str, Callable], qualified: frozenset = frozenset(),
             inline: Optional[Mapping[str, str]] = None, start: int = 0, free: str = "_FREE") -> tuple:
    """(generator, statements, result expression) of `source`'s program, the statements indented for a `try:` in a
    function of `A`: what compile_native wraps, and cel/templates.py puts several of into one function. Its names
    are numbered from `start` + 1; `free` names the set of its free variables that its errors are translated with."""
    generator = _Generator(functions, qualified, inline)
    generator.count, generator.free_name = start, free
    body: list[str] = []
    try:
        generator.tree = fold(parse(source))
        result = generator.value(generator.tree, body, "        ", {})
    except RecursionError:
        raise Unsupported("too deeply nested for the native compiler") from None
    if generator.reads_variables:
        body[:0] = ["        " + line for line in named.PROLOGUE]
    return generator, body, result


_IN = "    "


class _Generator(Comprehensions, messages.Construction, fastpaths.Operators, named.NamedVariables, Logic):
    """Emits statements into a list of lines and answers, for each node, a Python expression of its value.

    `value(node, out, indent, scope)` may append statements (at `indent`) that
    must run before the expression it returns; `scope` maps comprehension
    variables to the Python locals that carry them.
    """

    free_name = "_FREE"  # what the generated code reads the free variables by (`_translate(_e, A, _FREE)`)

    def __init__(self, functions: Mapping[str, Callable], qualified: frozenset = frozenset(),
                 inline: Optional[Mapping[str, str]] = None):
        self.functions = functions
        self.qualified = qualified
        self.inline = inline or {}
        self.free: set[str] = set()
        self.constants: dict[str, Any] = {}
        self.tree: tuple = ("lit", None)  # the folded tree compiled (cel/sums.py types its sum() calls)
        self.zeros: Optional[dict] = None
        self.count = 0
        self.loops = 0  # comprehensions open around the code being generated

    def name(self, prefix: str = "t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def constant(self, value: Any) -> str:
        name = self.name("k")
        self.constants[name] = value
        return name

    def value(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        return getattr(self, "_" + node[0])(node, out, indent, scope)

    def atom(self, node: tuple, out: list, indent: str, scope: dict, literal: bool = True) -> str:
        """The node's value as a name, or as a literal if `literal`: safe to mention twice.

        Code that tests the value with `is True` asks for a name (`literal=False`):
        Python warns on `1 is True`.
        """
        text = self.value(node, out, indent, scope)
        if text.isidentifier() and text not in ("True", "False", "None"):
            return text
        if literal and node[0] == "lit":
            return text
        temporary = self.name()
        out.append(f"{indent}{temporary} = {text}")
        return temporary

    # leaves
    def _lit(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        value = node[1]
        kind = type(value)
        if kind in (bool, str, bytes, int) or value is None:
            return repr(value)
        if kind is float and math.isfinite(value):
            return repr(value)
        return self.constant(value)  # uint, list, map, type, non-finite double

    def _ident(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        name = node[1]
        if name in scope:
            return scope[name]
        if name in TYPES:  # `list` is a type unless a variable of that name is bound
            return f"A.get({name!r}, {self.constant(TYPES[name])})"
        self.free.add(name)
        return f"A[{name!r}]"

    # access
    def _path(self, node: tuple, out: list, indent: str, scope: dict) -> str | None:
        """`container.resources.requests["cpu"]`: walked step by step into one local."""
        if self.qualified:
            node = self._qualify(node, scope)
            if node[0] == "ident":
                return self._ident(node, out, indent, scope)
        steps = []
        while True:
            if node[0] == "select":
                steps.append(node[2])
            elif node[0] == "index" and node[2][0] == "lit" and type(node[2][1]) in (str, int):
                steps.append(node[2][1])
            else:
                break
            node = node[1]
        if not steps:
            return None
        local = source = self.name()
        base = self.value(node, out, indent, scope)
        if node == ("ident", "variables") and "variables" not in scope and type(steps[-1]) is str:
            self.read_variable(steps.pop(), local, base, out, indent)  # a policy's named variable (cel/named.py)
        elif is_name(base):  # a local (a comprehension's variable, a result): the first step reads it where it is
            source = base
        else:
            out.append(f"{indent}{local} = {base}")
        for step in reversed(steps):
            out.append(f"{indent}{local} = {fastpaths.step(source, step)}")
            source = local
        return local

    def _qualify(self, node: tuple, scope: dict) -> tuple:
        """`node` with the longest declared dotted prefix of its selection chain (`a.b` of `a.b.c[0]`) made one
        identifier (`("ident", "a.b")`), as the checker resolved it (cel/tree.py)."""
        if node[0] == "index":
            inner = self._qualify(node[1], scope)
            return node if inner is node[1] else ("index", inner, node[2])
        found = resolve(node, scope, self.qualified)
        if found is None:
            return node
        rebuilt: tuple = ("ident", found[0])
        for step in found[1]:
            rebuilt = ("select", rebuilt, step[2])
        return rebuilt

    def _select(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        return self._path(node, out, indent, scope)

    def _optselect(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        return f"_optsel({self.atom(node[1], out, indent, scope)}, {node[2]!r})"

    def _optindex(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        operand = self.atom(node[1], out, indent, scope)
        return f"_optsel({operand}, {self.atom(node[2], out, indent, scope)})"

    def _index(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        path = self._path(node, out, indent, scope)
        if path is not None:
            return path
        operand, key = self.atom(node[1], out, indent, scope), self.atom(node[2], out, indent, scope)
        return f"({operand}[{key}] if type({operand}) is dict and type({key}) is str and {key} in {operand} " \
               f"else _idx({operand}, {key}))"  # a map's present string key inline, as runtime.index reads it

    # operators (`!`, `&&`, `||` and `?:`: cel/logic.py; the binary ones: cel/fastpaths.py)
    def _neg(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        return f"_neg({self.atom(node[1], out, indent, scope)})"

    # literals with parts
    def _list(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        if any(item[0] == "optitem" for item in node[1]):
            pairs = [(item[0] == "optitem", self.atom(item[1] if item[0] == "optitem" else item, out, indent, scope))
                     for item in node[1]]
            return "_optlist([" + ", ".join(f"({flag}, {value})" for flag, value in pairs) + "])"
        return "[" + ", ".join(self.atom(item, out, indent, scope) for item in node[1]) + "]"

    def _map(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        if any(k[0] == "optitem" for k, _ in node[1]):
            triples = [(k[0] == "optitem", self.atom(k[1] if k[0] == "optitem" else k, out, indent, scope),
                        self.atom(v, out, indent, scope)) for k, v in node[1]]
            return "_map(_optentries([" + ", ".join(f"({f}, {k}, {v})" for f, k, v in triples) + "]))"
        entries = [(self.atom(k, out, indent, scope), self.atom(v, out, indent, scope)) for k, v in node[1]]
        keys = [k for k, _ in node[1]]
        if all(k[0] == "lit" and type(k[1]) is str for k in keys) and len({k[1] for k in keys}) == len(keys):
            return "{" + ", ".join(f"{k}: {v}" for k, v in entries) + "}"
        return "_map([" + ", ".join(f"({k}, {v})" for k, v in entries) + "])"

    # calls and macros
    def _call(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        _, name, target, args = node
        if name == "has" and target is None:
            if len(args) != 1 or args[0][0] != "select":
                raise Unsupported("has() of something other than a field selection")
            operand = self.atom(args[0][1], out, indent, scope)
            field = args[0][2]
            return f"(({field!r} in {operand}) if type({operand}) is dict else _has({operand}, {field!r}))"
        if name in _MACROS and target is not None:
            return self._macro(name, target, args, out, indent, scope)
        if name in ("transformList", "transformMap") and target is not None and len(args) in (3, 4) \
                and args[0][0] == "ident" and args[1][0] == "ident":
            return self._transform(name, target, args, out, indent, scope)
        if name in ("optMap", "optFlatMap") and target is not None and len(args) == 2 and args[0][0] == "ident":
            return self._optmap(name, target, args, out, indent, scope)
        if name == "cel.bind" and target is None and len(args) == 3 and args[0][0] == "ident":
            local = self.name("b")
            out.append(f"{indent}{local} = {self.value(args[1], out, indent, scope)}")
            return self.value(args[2], out, indent, dict(scope, **{args[0][1]: local}))
        arguments = ((target,) if target is not None else ()) + args
        if name in BUILTINS and BUILTINS[name][0] == len(arguments):
            function = BUILTINS[name][1]
        elif name in self.functions:
            function = self.functions[name]
        else:
            raise Unsupported(f"function {name!r}")
        if name == "sum" and len(arguments) == 1:  # an empty list sums to the zero of its static type (cel/sums.py)
            self.zeros = sums.zeros(self.tree, self.inline, variable_tree) if self.zeros is None else self.zeros
            function = sums.typed_sum(function, self.zeros[id(node)]) if id(node) in self.zeros else function
        values = [self.atom(argument, out, indent, scope) for argument in arguments]
        return fastpaths.call(name, function, values, self.constant) or f"{self.constant(function)}({', '.join(values)})"
