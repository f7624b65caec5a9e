"""CEL's logic in generated code: `&&` and `||` with their error absorption, `!`, `?:` (a mixin of cel/compiler.py).

Why apart: the tests these emit are where knowing that an operand is a bool pays. A node that `boolean` answers
for yields a Python bool or raises, whatever the data (a comparison, `in`, `has()`, `!`, `&&`, `||`, a bool
literal, the boolean macros), so the code after it need not test for a non-boolean: the operand's value is tested
once, where it is made. Any other operand (a variable, a field, a function's result: JSON data is never known)
keeps every test, and CEL's semantics are the same either way: `&&`/`||` run their operands in order until one is
decisive, and an error or a non-boolean met before that is raised only if none is (`false && error` and
`error && false` are both false).
"""

from __future__ import annotations

_IN = "    "
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "in")
BOOLEAN_MACROS = ("all", "exists", "exists_one", "existsOne")


def boolean(node: tuple) -> bool:
    """Whether the code generated for `node` yields True or False, or raises: never another value.

    Each answer is the generator's own: `_binary` (cel/fastpaths.py) writes a comparison or `in` as a Python
    comparison, or calls runtime.equals/less/contains, which return bools; `has()` is `in` or runtime.has_field;
    `!`, `&&`, `||` and the macros `all`, `exists`, `exists_one` end in True or False."""
    kind = node[0]
    if kind in ("and", "or", "not"):
        return True
    if kind == "lit":
        return type(node[1]) is bool
    if kind == "binary":
        return node[1] in _COMPARISONS
    if kind == "call":
        return (node[1] == "has" and node[2] is None) or (node[1] in BOOLEAN_MACROS and node[2] is not None)
    if kind == "cond":
        return boolean(node[2]) and boolean(node[3])
    return False


def holds(text: str, wanted: bool, known: bool) -> str:
    """The Python condition that the value `text` is `wanted` (True or False); `known`: the value is a bool
    (`boolean`), so its truth is the test (`if x:`, `if not x:`: a jump on it, no `is` comparison)."""
    if known:
        return text if wanted else f"not {text}"
    return f"{text} is {wanted}"


def is_name(text: str) -> bool:
    """Whether generated text is a local's name (safe to test twice, nothing to store)."""
    return text.isidentifier() and text not in ("True", "False", "None")


class Logic:
    """The generator's `!`, `&&`, `||` and `?:` (it provides `name`, `value` and `atom`)."""

    def _not(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        operand = self.atom(node[1], out, indent, scope, literal=False)
        if boolean(node[1]):
            return f"(not {operand})"
        return f"(False if {operand} is True else True if {operand} is False else _fail(_overload('!', {operand})))"

    def _and(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        return self._logical(node[1], False, "&&", out, indent, scope)

    def _or(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        return self._logical(node[1], True, "||", out, indent, scope)

    def _logical(self, operands: tuple, decisive: bool, op: str, out: list, indent: str, scope: dict) -> str:
        """`&&` (decisive: False) or `||` (decisive: True) over a chain, with CEL's error absorption.

        Operands run in order until one is decisive; an error or a non-boolean
        met before that is raised only if none is (the first one met). The operands sit one after
        the other, each behind `if result is None`, so a long chain nests no blocks.
        """
        result, error = self.name("r"), self.name("e")
        out.append(f"{indent}{result} = None")
        out.append(f"{indent}{error} = None")
        for position, operand in enumerate(operands):
            inner = indent
            if position:
                out.append(f"{indent}if {result} is None:")
                inner = indent + _IN
            first = "" if position == 0 else f"if {error} is None: "  # no error can have been met before the first
            out.append(f"{inner}try:")
            start = len(out)
            text = self.value(operand, out, inner + _IN, scope)
            if is_name(text) and len(out) == start:  # a local read: nothing that can fail, nothing to try
                out.pop()
                self._decide(text, decisive, op, result, error, position, out, inner)
                continue
            if boolean(operand):  # True or False: decisive or not, nothing else to test
                out.append(f"{inner + _IN}if {holds(text, decisive, True)}: {result} = {decisive}")
                out.append(f"{inner}except Exception as _exc:")
                out.append(f"{inner + _IN}{first}{error} = _exc")
                continue
            value = text if is_name(text) else self.name()
            if value is not text:
                out.append(f"{inner + _IN}{value} = {text}")
            out.append(f"{inner}except Exception as _exc:")
            out.append(f"{inner + _IN}{first}{error} = _exc")
            out.append(f"{inner}else:")
            self._decide(value, decisive, op, result, error, position, out, inner + _IN)
        out.append(f"{indent}if {result} is None:")
        out.append(f"{indent + _IN}if {error} is not None: raise {error}")
        out.append(f"{indent + _IN}{result} = {not decisive}")
        return result

    @staticmethod
    def _decide(value: str, decisive: bool, op: str, result: str, error: str, position: int, out: list,
                indent: str) -> None:
        """The tests of a chain's operand that may be any value: decisive, or else an error if not a bool."""
        guard = "" if position == 0 else f" and {error} is None"
        out.append(f"{indent}if {value} is {decisive}: {result} = {decisive}")
        out.append(f"{indent}elif {value} is not {not decisive}{guard}: {error} = _overload({op!r}, {value})")

    def _cond(self, node: tuple, out: list, indent: str, scope: dict) -> str:
        test = self.atom(node[1], out, indent, scope, literal=False)
        result = self.name("r")
        out.append(f"{indent}if {holds(test, True, boolean(node[1]))}:")
        out.append(f"{indent + _IN}{result} = {self.value(node[2], out, indent + _IN, scope)}")
        if boolean(node[1]):
            out.append(f"{indent}else:")
            out.append(f"{indent + _IN}{result} = {self.value(node[3], out, indent + _IN, scope)}")
            return result
        out.append(f"{indent}elif {test} is False:")
        out.append(f"{indent + _IN}{result} = {self.value(node[3], out, indent + _IN, scope)}")
        out.append(f"{indent}else:")
        out.append(f"{indent + _IN}raise _overload('?:', {test})")
        return result
