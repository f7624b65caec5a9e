"""Comprehensions compiled to Python loops: CEL's macros (`all`, `exists`, `exists_one`, `map`, `filter`),
cel-go's two-variable forms and `transformList`/`transformMap`, and the optional `optMap`/`optFlatMap`.

A mixin of the compiler's generator (webhook/cel/compiler.py), which provides `name`, `value` and `atom`; kept apart
because loops are where the run-time step bound is paid (`_count`).
"""

from __future__ import annotations

from webhook.cel import fastpaths, logic
from webhook.cel import runtime as rt
from webhook.cel.values import Unsupported

_IN = "    "


class Comprehensions:
    """Code generation for loops; `loops` counts the loops the code being generated is inside, `counted` says
    whether any loop pays the step bound."""

    loops = 0
    counted = False

    def _count(self, target: tuple, items: str, out: list, indent: str) -> None:
        """The run-time bound, paid once per loop rather than per step: the steps a loop will take are counted
        before it starts (an early exit is counted in full: conservative; a loop too long never starts).

        A loop inside no other loop, over a field of the input, is linear in the input (at most the request's
        size): it is not counted, so the common rule pays nothing. Nested loops, and loops over built values
        (a concatenation, a map() result), are."""
        if self.loops == 0 and target[0] in ("select", "index", "ident"):
            return
        self.counted = True  # the program starts its count (`_n = 0`) only if it has one
        out.append(f"{indent}_n += len({items})")
        out.append(f"{indent}if _n > {rt.MAX_STEPS}: raise _over()")

    def _items(self, target: tuple, out: list, indent: str, scope: dict) -> str:
        """What a loop walks, as a name (a local as it is: fastpaths.iterable's test never rebinds it)."""
        text = self.value(target, out, indent, scope)
        if logic.is_name(text):
            return text
        items = self.name("i")
        out.append(f"{indent}{items} = {text}")
        return items

    def _keep(self, node: tuple, name: str, out: list, indent: str, scope: dict) -> None:
        """A loop's filter (`map(v, filter, expr)`, `transformList(i, v, filter, expr)`): the next element unless
        it is true, an error unless it is a bool."""
        keep = self.atom(node, out, indent, scope, literal=False)
        out.append(f"{indent}if {logic.holds(keep, False, logic.boolean(node))}: continue")
        if not logic.boolean(node):
            out.append(f"{indent}if {keep} is not True: raise _overload({name!r}, {keep})")

    def _transform(self, name: str, target: tuple, args: tuple, out: list, indent: str, scope: dict) -> str:
        """cel-go's two-variable `transformList(i, v, [filter,] expr)` and `transformMap(k, v, [filter,] expr)`."""
        items = self._items(target, out, indent, scope)
        key, variable, result = self.name("v"), self.name("v"), self.name("r")
        out.append(f"{indent}{fastpaths.iterable(items, name)}")
        self._count(target, items, out, indent)
        self.loops += 1
        inner = dict(scope, **{args[0][1]: key, args[1][1]: variable})
        body = indent + _IN
        out.append(f"{indent}{result} = {'[]' if name == 'transformList' else '{}'}")
        out.append(f"{indent}for {key}, {variable} in _pairs({items}):")
        if len(args) == 4:
            self._keep(args[2], name, out, body, inner)
        value = self.value(args[-1], out, body, inner)
        out.append(f"{body}{result}.append({value})" if name == "transformList" else f"{body}{result}[{key}] = {value}")
        self.loops -= 1
        return result

    def _optmap(self, name: str, target: tuple, args: tuple, out: list, indent: str, scope: dict) -> str:
        """`opt.optMap(v, expr)` / `opt.optFlatMap(v, expr)`: none stays none, a value goes through expr."""
        optional, result, variable = self.atom(target, out, indent, scope), self.name("r"), self.name("v")
        out.append(f"{indent}if type({optional}) is not _Opt: raise _overload({name!r}, {optional})")
        out.append(f"{indent}if {optional} is _NONE:")
        out.append(f"{indent + _IN}{result} = _NONE")
        out.append(f"{indent}else:")
        out.append(f"{indent + _IN}{variable} = {optional}.value")
        value = self.value(args[1], out, indent + _IN, dict(scope, **{args[0][1]: variable}))
        out.append(f"{indent + _IN}{result} = {'_Opt(' + value + ')' if name == 'optMap' else value}")
        return result

    def _macro(self, name: str, target: tuple, args: tuple, out: list, indent: str, scope: dict) -> str:
        depth = self.loops
        try:
            return self._comprehension(name, target, args, out, indent, scope)
        finally:
            self.loops = depth

    def _comprehension(self, name: str, target: tuple, args: tuple, out: list, indent: str, scope: dict) -> str:
        two = name in ("all", "exists", "exists_one", "existsOne") and len(args) == 3 and args[1][0] == "ident"
        arity = 3 if (name == "map" and len(args) == 3) or two else 2
        if len(args) != arity or args[0][0] != "ident":
            raise Unsupported(f"{name}() without a variable name")
        name = "exists_one" if name == "existsOne" else name
        items = self._items(target, out, indent, scope)
        out.append(f"{indent}{fastpaths.iterable(items, name)}")
        variable = self.name("v")
        if two:  # (index, value) over a list, (key, value) over a map
            key = self.name("v")
            inner_scope = dict(scope, **{args[0][1]: key, args[1][1]: variable})
            header = f"for {key}, {variable} in _pairs({items}):"
            args = args[1:]
        else:
            inner_scope = dict(scope, **{args[0][1]: variable})
            header = f"for {variable} in {items}:"
        body = indent + _IN
        self._count(target, items, out, indent)
        self.loops += 1
        result = self.name("r")
        if name in ("all", "exists"):
            decisive = name == "exists"
            error, value = self.name("e"), self.name()
            out.append(f"{indent}{result} = {not decisive}")
            out.append(f"{indent}{error} = None")
            out.append(f"{indent}{header}")
            out.append(f"{body}try:")
            start = len(out)
            text = self.value(args[1], out, body + _IN, inner_scope)
            value = text if logic.is_name(text) and len(out) > start else value  # (a `try:` body is never empty)
            if value is not text:
                out.append(f"{body + _IN}{value} = {text}")
            out.append(f"{body}except Exception as _exc:")
            out.append(f"{body + _IN}if {error} is None: {error} = _exc")
            out.append(f"{body + _IN}continue")
            out.append(f"{body}if {logic.holds(value, decisive, logic.boolean(args[1]))}:")
            out.append(f"{body + _IN}{result} = {decisive}")
            out.append(f"{body + _IN}break")
            if not logic.boolean(args[1]):  # a bool needs no test for another value (cel/logic.py)
                out.append(f"{body}if {value} is not {not decisive} and {error} is None: "
                           f"{error} = _overload({name!r}, {value})")
            out.append(f"{indent}else:")
            out.append(f"{body}if {error} is not None: raise {error}")
            return result
        out.append(f"{indent}{result} = {0 if name == 'exists_one' else []}")
        out.append(f"{indent}{header}")
        if name == "map" and arity == 3:
            self._keep(args[1], "map", out, body, inner_scope)
        if name == "map":
            out.append(f"{body}{result}.append({self.value(args[-1], out, body, inner_scope)})")
            return result
        keep = self.atom(args[1], out, body, inner_scope, literal=False)
        kept = f"{result} {'+= 1' if name == 'exists_one' else f'.append({variable})'}"
        out.append(f"{body}if {logic.holds(keep, True, logic.boolean(args[1]))}: {kept}")
        if not logic.boolean(args[1]):
            out.append(f"{body}elif {keep} is not False: raise _overload({name!r}, {keep})")
        return f"({result} == 1)" if name == "exists_one" else result
