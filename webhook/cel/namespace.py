"""The names every generated program runs with: the runtime's helpers (`_eq`, `_sel`, ...) and CEL's built-in
functions by arity.

A module of its own because two kinds of code need it: what generates a program (cel/generator.py emits calls by
these names) and what runs one (cel/compiler.py, cel/templates.py: a recalled program is executed in this
namespace). A run whose programs were all generated before (cel/stored.py) imports this, not the generator.
"""

from __future__ import annotations

from typing import Callable

from webhook.cel import conversions as cv
from webhook.cel import runtime as rt
from webhook.cel.values import NO_VALUES

HELPERS = {
    "_eq": rt.equals, "_less": rt.less, "_add": rt.add, "_arith": rt.arith, "_in": rt.contains,
    "_sel": rt.select, "_idx": rt.index, "_fail": rt.fail, "_overload": rt.overload, "_neg": rt.negate,
    "_has": rt.has_field, "_iter": rt.iterable, "_map": rt.make_map, "_translate": rt.translate,
    "_optsel": rt.opt_select, "_over": rt.over_budget, "_pairs": rt.pairs, "_optlist": rt.opt_list,
    "_optentries": rt.opt_entries, "_unordered": rt.unordered, "_Opt": rt.Optional, "_NONE": rt.NONE,
    "_Vars": rt.Variables, "_NOVALUES": NO_VALUES,
}
BUILTINS: dict[str, tuple[int, Callable]] = {
    "size": (1, rt.size),
    "int": (1, cv.to_int),
    "uint": (1, cv.to_uint),
    "double": (1, cv.to_double),
    "string": (1, cv.to_string),
    "bool": (1, cv.to_bool),
    "bytes": (1, cv.to_bytes),
    "dyn": (1, lambda value: value),
    "type": (1, rt.type_of),
    "startsWith": (2, rt.string_method("startsWith")),
    "endsWith": (2, rt.string_method("endsWith")),
    "contains": (2, rt.string_method("contains")),
}
