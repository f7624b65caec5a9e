"""A policy's named variables read by generated code (`variables.NAME`): a mixin of the compiler's generator.

Why: a rule reads its policy's variables many times (a PyTorchJob's rules made ~70 reads per evaluation), and
each read was written as `t = A['variables']`, a test that the value is the binding's `Variables`
(cel/values.py), then a lookup in its `values`: ~20 bytecodes for a variable already computed. Here a program
that reads a variable first takes the binding's `values` dict once (`_W`, an empty mapping when `variables` is
not a `Variables`: a plain map bound by a test or a caller), so a computed variable's read is a membership test
and a lookup; anything else (the first read, a failure kept, a `variables` that is not a `Variables`, none
bound) takes the very path it took before, from `A['variables']`.

Sound because `A['variables']` is one object for the whole run of a program (generated code never writes `A`),
and a `Variables`' `values` dict is made once and only ever added to: what `_W` holds is what `values` holds.
"""

from __future__ import annotations

from functools import lru_cache

from webhook.cel.folding import fold
from webhook.cel.parser import parse
from webhook.cel.values import NO_VALUES  # noqa: F401 - re-exported

_IN = "    "
VARIABLES, VALUES = "_V", "_W"  # the locals holding `A['variables']` and, when it is a Variables, its `values`
PROLOGUE = (f"try: {VARIABLES} = A['variables']", f"except Exception: {VARIABLES} = None",  # raised where it is read
            f"{VALUES} = {VARIABLES}.values if type({VARIABLES}) is _Vars else _NOVALUES")


@lru_cache(maxsize=1024)
def variable_tree(source: str) -> tuple:
    """A named variable's folded tree, parsed once for all the programs that inline it (trees are never mutated)."""
    return fold(parse(source))


class NamedVariables:
    """`read_variable`, for the generator (cel/compiler.py), which provides `value`, `inline` and `free_name`;
    `reads_variables` says whether the code generated needs the prologue (`PROLOGUE`'s lines, put first)."""

    reads_variables = False

    def read_variable(self, name: str, local: str, variables: str, out: list, indent: str) -> None:
        """`local = variables.NAME`, where `variables` is the Python text of `A['variables']`."""
        self.reads_variables = True
        fast = f"if {name!r} in {VALUES}: {local} = {VALUES}[{name!r}]"
        if name not in self.inline:
            out += [f"{indent}{fast}", f"{indent}else: {local} = _sel({variables}, {name!r})"]
            return
        # computed here on its first read in the binding; its error is kept too
        body, inner = [], indent + _IN * 2
        result = self.value(variable_tree(self.inline[name]), body, inner, {})
        out += [f"{indent}{fast}", f"{indent}elif {VALUES} is _NOVALUES: {local} = _sel({variables}, {name!r})",
                f"{indent}elif {name!r} in {VARIABLES}.failed: raise {VARIABLES}.failed[{name!r}]",
                f"{indent}else:", f"{indent}{_IN}try:", *body, f"{inner}{VALUES}[{name!r}] = {local} = {result}",
                f"{indent}{_IN}except Exception as _e:",
                f"{indent}{_IN * 2}{VARIABLES}.fail({name!r}, _translate(_e, A, {self.free_name}))",
                f"{indent}{_IN * 2}raise"]
