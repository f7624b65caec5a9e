"""The load-time checker: every name declared, every function known, every type error decidable without data.

Why: a rule that names a variable nobody binds (`has(contaner.name)`) used to load and then fail closed on every
review. The checker walks the parser's tree (cel/parser.py) with the declarations of the rule's level (objects from
JSON are `dyn`, aiadmit's own variables are closed structs whose fields are known) and the function table
(cel/library.py), and raises CheckError with the offset in the source as the author wrote it. It needs no data and
no reference library, so it runs on every load in microseconds per expression.

Types: "dyn", "bool", "int", "uint", "double", "string", "bytes", "null", "type",
"quantity", "optional", ("list", elem), ("map", key, value), or a Struct.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from webhook.cel import strictness as strict
from webhook.cel.operators import binary
from webhook.cel import messages, patterns
from webhook.cel.strictness import SURE_DYN
from webhook.cel.tree import depth, resolve
from webhook.cel.constants import DYN, WHOLE, Struct, show, type_of_value  # noqa: F401 - Struct re-exported

MAX_DEPTH = 120  # nesting of the tree: deeper would exhaust the checker's, compiler's or reference library's stack
MAX_LENGTH = 100_000  # code points of one expression, as cel-go's default limit
_NUMERIC = frozenset({"int", "uint", "double"})
_MACROS = frozenset({"all", "exists", "exists_one", "existsOne", "map", "filter"})
_CONVERSIONS = {"int": "int", "uint": "uint", "double": "double", "string": "string", "bytes": "bytes",
                "bool": "bool", "dyn": DYN, "type": "type", "size": "int"}
_STRING_METHODS = {"startsWith", "endsWith", "contains"}
# Timestamp and duration accessors: run on the reference library (the native compiler lacks them)
REFERENCE_ONLY: frozenset = frozenset()  # everything the checker knows now compiles natively
_TYPE_NAMES = frozenset({"bool", "int", "uint", "double", "string", "bytes", "null_type", "list", "map", "type",
                         "optional_type", "net.IP", "net.CIDR"})  # the last two: Kubernetes' (cel/k8slibs.py)


class CheckError(ValueError):
    """A rule that cannot be right whatever the data: `offset` is 0-based in the checked source."""

    def __init__(self, message: str, offset: int, param: Optional[tuple] = None):
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.param = param  # a param's path (name[, index]) when the mistake is that param's value, not the source


def _accepts(kind: Any, wanted: str) -> bool:
    if kind == DYN or wanted == "any":
        return True
    if wanted == "number":
        return kind in _NUMERIC or kind == "quantity"
    if wanted == "list":
        return isinstance(kind, tuple) and kind[0] == "list"
    if wanted == "map":
        return (isinstance(kind, tuple) and kind[0] == "map") or isinstance(kind, Struct)
    return kind == wanted


class Checker:
    """One check of one tree: `check()` answers its type and records the free variables it reads."""

    def __init__(self, positions: Mapping[int, int], declarations: Mapping[str, Any],
                 functions: Mapping[str, Any], lenient: bool = False, kubernetes: bool = True):
        self.positions = positions
        self.kubernetes = kubernetes  # Kubernetes' literal validators too (cel/strictness.py), not only cel-go's
        self.exempt = 0  # inside a format() call: its literals need not be homogeneous
        self.param_values: dict = {}  # the policy's params (constants at load): the typed constants they feed are checked
        self.bound: dict = {}  # a comprehension's (or cel.bind's) variable -> the constants it takes, or None
        self.declarations = declarations
        self.lenient = lenient  # every undeclared free name is a dyn variable (the API without a level)
        self.functions = functions
        # declared dotted names (`a.b.c`): CEL's qualified-name resolution, tried only when there are any
        self.qualified = frozenset(name for name in declarations if "." in name)
        self.free: set[str] = set()
        self.named: set[str] = set()  # the policy variables read as `variables.NAME` / `variables["NAME"]` (or WHOLE)
        self.reference_only = False
        self.type: Any = DYN  # the checked expression's type
        self.types: dict[int, Any] = {}  # id(node) -> its type, while the tree is alive

    def fail(self, node: tuple, message: str) -> CheckError:
        return CheckError(message, self.positions.get(id(node), 0))

    def check(self, node: tuple, scope: Mapping[str, Any] = {}) -> Any:  # noqa: B006 - never mutated
        # Each node has one scope; the strictness checks look at a node's type again, and without this memo a
        # nesting such as [?optional.of([?optional.of(...)])] would be checked 2^depth times.
        kind = self.types.get(id(node))
        if kind is None:
            kind = self.types[id(node)] = getattr(self, "_" + node[0])(node, scope)
        return kind

    def _lit(self, node: tuple, scope: Mapping) -> Any:
        return type_of_value(node[1]) if not isinstance(node[1], (bytes,)) else "bytes"

    def _ident(self, node: tuple, scope: Mapping, whole: bool = True) -> Any:
        name = node[1]
        if name in scope:
            return scope[name]
        if name == "variables" and whole:  # not as `variables.NAME` (_operand): what reads it may read any of them
            self.named.add(WHOLE)
        if name in self.declarations:
            self.free.add(name)
            kind = self.declarations[name]
            return SURE_DYN if kind == DYN else kind
        if name in _TYPE_NAMES:
            return "type"
        if self.lenient:
            self.free.add(name)
            return SURE_DYN
        known = ", ".join(sorted(n for n in self.declarations if not n.startswith("@")))
        raise self.fail(node, f"undeclared reference to {name!r} (this rule's variables: {known})")

    def _field(self, node: tuple, operand: Any, field: str) -> Any:
        if operand == DYN:
            return operand  # a field of a sure dyn is a sure dyn
        if isinstance(operand, Struct):
            if field in operand.fields:
                return operand.fields[field]
            if operand.open:
                return DYN
            if operand.name == "params":
                raise self.fail(node, f"unknown parameter {field!r} (known: {', '.join(sorted(operand.fields)) or 'none'})")
            raise self.fail(node, f"{operand.name} has no field {field!r} (its fields: "
                                  f"{', '.join(sorted(operand.fields))})")
        if isinstance(operand, tuple) and operand[0] == "map":
            return operand[2]
        if operand == "optional":
            return "optional"
        raise self.fail(node, f"a {show(operand)} has no fields (selecting {field!r})")

    def _operand(self, node: tuple, scope: Mapping, field: Any) -> Any:
        """The type of what is selected or indexed; `variables` by a constant name records that name alone."""
        if type(field) is str and node == ("ident", "variables") and "variables" not in scope:
            self.named.add(field)
            return self._ident(node, scope, whole=False)
        return self.check(node, scope)

    def _select(self, node: tuple, scope: Mapping) -> Any:
        if self.qualified:
            found = self._qualified(node, scope)
            if found is not None:
                return found
        return self._field(node, self._operand(node[1], scope, node[2]), node[2])

    def _qualified(self, node: tuple, scope: Mapping) -> Any:
        """The type of a selection that CEL's name resolution reads as a dotted variable (cel/tree.py), or None."""
        found = resolve(node, scope, self.qualified)
        if found is None:
            return None
        self.free.add(found[0])
        kind = self.declarations[found[0]]
        for step in found[1]:
            kind = self._field(step, kind, step[2])
        return kind

    def _optselect(self, node: tuple, scope: Mapping) -> Any:
        self._field(node, self._operand(node[1], scope, node[2]), node[2])
        return "optional"

    def _index(self, node: tuple, scope: Mapping) -> Any:
        operand = self._operand(node[1], scope, node[2][1] if node[2][0] == "lit" else None)
        key = self.check(node[2], scope)
        if operand == DYN:
            return operand
        if isinstance(operand, Struct):
            if node[2][0] == "lit" and type(node[2][1]) is str:
                return self._field(node, operand, node[2][1])
            return DYN
        if isinstance(operand, tuple) and operand[0] == "list":
            if key not in (DYN, "int", "uint"):
                raise self.fail(node, f"a list index must be an int, not a {show(key)}")
            return operand[1]
        if isinstance(operand, tuple) and operand[0] == "map":
            return operand[2]
        if operand == "optional":
            return "optional"
        raise self.fail(node, f"a {show(operand)} cannot be indexed")

    def _optitem(self, node: tuple, scope: Mapping) -> Any:
        kind = self.check(node[1], scope)
        if kind not in (DYN, "optional"):
            raise self.fail(node, f"`?` takes an optional, not a {show(kind)}")
        return DYN

    def _optindex(self, node: tuple, scope: Mapping) -> Any:
        self._index(node, scope)
        return "optional"

    def _bool(self, node: tuple, kind: Any, what: str) -> None:
        if kind not in (DYN, "bool"):
            raise self.fail(node, f"{what} takes a bool, not a {show(kind)}")

    def _not(self, node: tuple, scope: Mapping) -> Any:
        self._bool(node, self.check(node[1], scope), "!")
        return "bool"

    def _neg(self, node: tuple, scope: Mapping) -> Any:
        kind = self.check(node[1], scope)
        if kind not in (DYN, "int", "double"):
            raise self.fail(node, 'quantities negate with sub() (quantity("0").sub(q)) or test sign(), not -'
                            if kind == "quantity" else f"no matching overload for '-' applied to ({show(kind)})")
        return kind

    def _and(self, node: tuple, scope: Mapping) -> Any:
        for operand in node[1]:
            self._bool(operand, self.check(operand, scope), "&&")
        return "bool"

    _or = _and

    def _cond(self, node: tuple, scope: Mapping) -> Any:
        self._bool(node, self.check(node[1], scope), "?:")
        a, b = self.check(node[2], scope), self.check(node[3], scope)
        if strict.unify(a, b) is None:
            raise self.fail(node, f"no matching overload for '?:' applied to (bool, {show(a)}, {show(b)})")
        if a is SURE_DYN or b is SURE_DYN:  # cel-go joins dyn and any type to dyn
            return SURE_DYN  # in a MAP's mutation, an empty literal's element type is the other branch's
        return a if show(a) == show(b) else messages.join(self, node, a, b)

    def _homogeneous(self, nodes: list, kinds: list) -> None:
        if self.kubernetes and not self.exempt and (found := strict.mismatch(kinds)):
            raise self.fail(nodes[found[0]], found[1])

    def _held(self, node: tuple, scope: Mapping) -> Any:
        """The type an optional holds, when it is written `optional.of(x)` (aiadmit's optionals are untyped)."""
        if node[0] == "call" and node[1] in ("optional.of", "optional.ofNonZeroValue") and len(node[3]) == 1:
            return self.check(node[3][0], scope)
        if node[0] in ("optselect", "optindex") and self.check(node[1], scope) is SURE_DYN:
            return SURE_DYN  # x.?f of a dyn x holds a dyn
        return DYN

    def _list(self, node: tuple, scope: Mapping) -> Any:
        found = [self.check(item, scope) for item in node[1]]
        self._homogeneous(node[1], [self._held(item[1], scope) if item[0] == "optitem" else k
                                    for item, k in zip(node[1], found)])
        kinds = {show(k): k for k in found}
        return ("list", next(iter(kinds.values())) if len(kinds) == 1 else DYN)

    def _map(self, node: tuple, scope: Mapping) -> Any:
        keys, values, order = {}, {}, []
        for key, value in node[1]:
            optional = key[0] == "optitem"
            if optional:  # `{?k: v}`: v is the optional
                key = key[1]
                if self.check(value, scope) not in (DYN, "optional"):
                    raise self.fail(value, "`?` takes an optional value")
            kind = self.check(key, scope)
            if kind not in (DYN, "string", "int", "uint", "bool"):
                raise self.fail(key, f"a {show(kind)} cannot be a map key")
            keys[show(kind)] = kind
            kinds = self.check(value, scope)
            values[show(kinds)] = kinds
            order += [(key, kind), (value, self._held(value, scope) if optional else kinds)]
        for part in (0, 1):  # keys, then values: Kubernetes' homogeneous map literals
            self._homogeneous([n for n, _ in order[part::2]], [k for _, k in order[part::2]])
        one = lambda found: next(iter(found.values())) if len(found) == 1 else DYN  # noqa: E731
        return ("map", one(keys), one(values))

    def _struct(self, node: tuple, scope: Mapping) -> Any:  # `JSONPatch{...}`, `Object{...}`: a MAP's
        return messages.check(self, node, scope, Struct)

    def _binary(self, node: tuple, scope: Mapping) -> Any:
        return binary(self, node, self.check(node[2], scope), self.check(node[3], scope))

    def _call(self, node: tuple, scope: Mapping) -> Any:
        _, name, target, args = node
        if name == "has" and target is None:
            if len(args) != 1 or args[0][0] != "select":
                raise self.fail(node, "has() takes one field selection, such as has(container.name)")
            self._field(args[0], self._operand(args[0][1], scope, args[0][2]), args[0][2])
            return "bool"
        if target is not None and name in _MACROS and args and args[0][0] == "ident":
            return self._macro(node, name, target, args, scope)
        if target is not None and name in ("transformList", "transformMap") and len(args) in (3, 4) and \
                args[0][0] == "ident" and args[1][0] == "ident":
            self.check(target, scope)
            inner = dict(scope, **{args[0][1]: DYN, args[1][1]: DYN})
            ranges = patterns.elements(self._values(target, scope), True)
            kinds = self._bound({args[0][1]: ranges[0], args[1][1]: ranges[1]},
                                lambda: [self.check(part, inner) for part in args[2:]])
            if len(kinds) == 2:
                self._bool(args[2], kinds[0], f"{name}()'s filter")
            return ("list", kinds[-1]) if name == "transformList" else ("map", DYN, kinds[-1])
        if target is not None and name in ("optMap", "optFlatMap") and len(args) == 2 and args[0][0] == "ident":
            if self.check(target, scope) not in (DYN, "optional"):
                raise self.fail(node, f"{name}() takes an optional")
            self._bound({args[0][1]: None}, lambda: self.check(args[1], dict(scope, **{args[0][1]: DYN})))
            return "optional"
        if name == "cel.bind":
            if len(args) != 3 or args[0][0] != "ident":
                raise self.fail(node, "cel.bind() takes a name, a value and an expression")
            bound = self.check(args[1], scope)
            return self._bound({args[0][1]: self._values(args[1], scope)},
                               lambda: self.check(args[2], dict(scope, **{args[0][1]: bound})))
        arguments = ((target,) if target is not None else ()) + args
        self.exempt += name == "format"
        try:
            kinds = [self.check(argument, scope) for argument in arguments]
        finally:
            self.exempt -= name == "format"
        if name in REFERENCE_ONLY:
            self.reference_only = True
            return DYN
        problem = strict.overload_problem(name, kinds, target is not None)
        if problem is not None:
            raise self.fail(node, f"no matching overload for {name}() applied to "
                                  f"({', '.join(show(k) for k in kinds)}){': ' + problem if problem else ''}")
        if self.kubernetes:
            strict.validate(self, name, arguments, scope)
        timed = strict.time_call(name, kinds, target is not None)
        if timed is not None:
            self._constants(name, arguments, scope)
            return timed
        if name in _CONVERSIONS and target is None and len(kinds) == 1:
            return SURE_DYN if name == "dyn" else _CONVERSIONS[name]
        if name in _STRING_METHODS and len(kinds) == 2:
            for argument, kind in zip(((target,) if target is not None else ()) + args, kinds):
                if kind not in (DYN, "string"):
                    raise self.fail(argument, f"{name}() takes strings, not a {show(kind)}")
            return "bool"
        if name == "size" and target is not None and not args:
            return "int"
        function = self.functions.get(name)
        if function is None:
            raise self.fail(node, f"undeclared function {name!r}")
        if function.member is True and target is None:
            raise self.fail(node, f"{name}() is a method: write x.{name}(...)")
        if function.member is False and target is not None:
            raise self.fail(node, f"{name}() is a global function: write {name}(x, ...)")
        shapes = [shape for shape in function.args if len(shape) == len(kinds)]
        if not shapes:
            counts = sorted({len(shape) - (target is not None) for shape in function.args})
            raise self.fail(node, f"{name}() takes {' or '.join(map(str, counts))} argument(s), "
                                  f"not {len(kinds) - (target is not None)}")
        if not any(all(_accepts(kind, wanted) for kind, wanted in zip(kinds, shape)) for shape in shapes):
            raise self.fail(node, f"no matching overload for {name}() applied to "
                                  f"({', '.join(show(k) for k in kinds)})")
        if function.check is not None and (problem := function.check(kinds, target is not None)):  # Kubernetes'
            raise self.fail(node, f"no matching overload for {name}() applied to ({show(kinds[0])}): {problem}")
        self._constants(name, arguments, scope)
        if function.result is None and name in ("sum", "min", "max") and isinstance(kinds[0], tuple):
            return kinds[0][1]
        return function.result if function.result is not None else DYN

    def _values(self, node: tuple, scope: Mapping) -> Optional[list]:
        return patterns.values(node, scope, self.param_values, self.bound)

    def _bound(self, variables: Mapping[str, Any], check: Any) -> Any:
        return patterns.binding(self.bound, variables, check)

    def _constants(self, name: str, arguments: tuple, scope: Mapping) -> None:
        """A constant argument that cannot run (cel/patterns.py): at the argument, with the param's path if any."""
        problem = patterns.constant_problem(name, arguments, scope, self, self.functions)
        if problem is not None:
            raise CheckError(problem[0], self.fail(problem[1], "").offset, problem[2])

    def _macro(self, node: tuple, name: str, target: tuple, args: tuple, scope: Mapping) -> Any:
        over = self.check(target, scope)
        if over == DYN or over == "optional":
            element, key = (over, over) if over == DYN else (DYN, DYN)
        elif isinstance(over, tuple) and over[0] == "list":
            element, key = over[1], "int"
        elif isinstance(over, tuple) and over[0] == "map":
            element, key = over[1], over[1]
        elif isinstance(over, Struct):
            element, key = "string", "string"
        else:
            raise self.fail(node, f"{name}() needs a list or a map, not a {show(over)}")
        two = name != "map" and len(args) == 3 and args[1][0] == "ident"  # (index or key, value, body)
        if two:
            value = over[2] if isinstance(over, tuple) and over[0] == "map" else element
            inner = dict(scope, **{args[0][1]: key, args[1][1]: value})
            body = args[2:]
        else:
            inner = dict(scope, **{args[0][1]: element})
            body = args[1:]
        if len(body) not in ((1, 2) if name == "map" else (1,)):
            raise self.fail(node, f"{name}() takes a variable name and an expression")
        ranges = patterns.elements(self._values(target, scope), two)
        kinds = self._bound({args[0][1]: ranges[0], args[1][1]: ranges[1]} if two else {args[0][1]: ranges[0]},
                            lambda: [self.check(part, inner) for part in body])
        if name in ("all", "exists", "exists_one", "existsOne"):
            self._bool(body[-1], kinds[-1], f"{name}()")
            return "bool"
        if name == "filter":
            self._bool(body[-1], kinds[-1], "filter()")
            return ("list", element)
        if len(body) == 2:
            self._bool(body[0], kinds[0], "map()'s filter")
        return ("list", kinds[-1])


def check(tree: tuple, positions: Mapping[int, int], declarations: Optional[Mapping[str, Any]],
          functions: Mapping[str, Any], lenient: bool = False, kubernetes: bool = True,
          params: Optional[Mapping[str, Any]] = None, named: Optional[Mapping[str, list]] = None) -> Checker:
    """Check a parsed tree; CheckError (with the offset) on the first problem. The Checker says what it read.
    `named`: the policy's named variables that are constants of its params (cel/patterns.py `of_source`)."""
    if depth(tree) > MAX_DEPTH:
        raise CheckError(f"expression nested deeper than {MAX_DEPTH} levels: split it (variables, or several rules)",
                         0)
    checker = Checker(positions, declarations or {}, functions, lenient, kubernetes)
    checker.param_values = dict(params or {})
    checker.bound = patterns.bound_for(named)
    kind = checker.check(tree)
    checker.type = strict.plain(kind)  # as a recorded check gives it
    return checker
