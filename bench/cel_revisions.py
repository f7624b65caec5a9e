"""The native CEL compiler of two revisions, run differentially: every outcome (value or error message) the same?

    python3 bench/cel_revisions.py BASE [NEW]

A check for a change to the code cel/compiler.py generates that must not change what it computes. BASE and NEW are
git revisions (NEW defaults to the work tree as it is), each exported with `git archive`. Each compiles the same
generated expressions (`&&`/`||`/`!` chains over bools, errors, non-bools, has(), `?:`, macros, `+`, the string
functions and matches(), a policy's named variables) with the named variables inlined and not, and runs each over
three activations with `variables` bound as the engine binds it (a `Variables`: computed once, failures kept), as a
plain map, and not bound at all. Prints the number of outcomes and the first differences; exit status 1 if any.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from engine_instructions import export  # bench/: one way to export a revision

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = r"""
import sys
sys.path.insert(0, sys.argv[1])
from webhook.cel.compiler import compile_native
from webhook.cel.environment import FUNCTIONS, Activation
from webhook.cel.values import Variables

VARS = {"ok": "true", "bad": "1 / 0 == 1", "num": "7", "list": "[1, 2]", "s": "'x'", "d": "{'a': 1}",
        "dep": "variables.ok && variables.num > 3", "deperr": "variables.bad || true", "nb": "x"}
ATOMS = ["true", "false", "x", "y", "1 / 0 == 1", "variables.ok", "variables.bad", "variables.num", "variables.nb",
         "has(m.a)", "has(m.z)", "has(x.a)", "m.a == 1", "m.z == 1", "!variables.ok", "!x", "variables.deperr",
         "variables.dep", "variables.missing", "x.startsWith('a')", "s.startsWith('a')", "s.contains(s)",
         "s.matches('^a')", "s.matches('(')", "x.matches('a')", "[1,2].all(e, e > 0)", "[1,'a'].all(e, e > 0)",
         "[1,2].exists(e, e == 2)", "[0, 1].exists(e, 1 / e == 1)", "[true, 1].exists(e, e)", "[1].all(e, e)",
         "size([1].filter(e, e))", "size([1,2].filter(e, e > 1)) == 1", "(x ? true : false)", "(true ? 1 : 2) == 1",
         "(1 / 0 == 1 ? true : false)", "(has(m.a) ? m.a == 1 : false)", "s + 'b' == 'ab'", "s + s == 'aa'",
         "[1] + [2] == [1, 2]", "x + 'a' == 'a'", "1 + 2 == 3", "9223372036854775807 + 1 > 0", "s + 1 == 'a'",
         "b'a' + b'b' == b'ab'", "variables.list + [3] == [1, 2, 3]", "variables.s + variables.s == 'xx'",
         "'ab'.contains('b')", "'ab'.endsWith(s)", "variables.d.a == 1", "m.a + m.a == 2 && has(m.a) && m.a > 0",
         "[1, 2].map(e, m.a + e) == [2, 3]", "[1].exists(e, m.z == e) || m.a == 1"]
EXPRS = list(ATOMS)
for a in ATOMS[:22]:
    for b in ATOMS[:22]:
        EXPRS += [f"{a} && {b}", f"{a} || {b}"]
for a in ATOMS[:12]:
    for b in ATOMS[:12]:
        for c in ATOMS[:12:3]:
            EXPRS += [f"{a} && ({b} || {c})", f"!({a} || {b}) && {c}"]
CONTEXTS = [{"x": True, "y": False, "m": {"a": 1}, "s": "a"}, {"x": 1, "y": "s", "m": [], "s": 2},
            {"x": None, "y": True, "m": {"z": 2}, "s": "ab"}]


class Program:
    def __init__(self, source):
        self.program = compile_native(source, FUNCTIONS)

    def run(self, context):
        return self.program.execute(context)


def outcome(program, context):
    try:
        return repr(program.execute(context))
    except Exception as exc:  # any error is a CEL error: its type and message are what is compared
        return f"{type(exc).__name__}: {exc}"


for expr in EXPRS:
    for inline in (None, VARS):
        try:
            program = compile_native(expr, FUNCTIONS, None, frozenset(), inline)
        except Exception as exc:
            print(f"{expr} | compile {type(exc).__name__}: {exc}")
            continue
        for index, base in enumerate(CONTEXTS):
            for plain in (False, True):
                context = Activation(base)
                context["variables"] = ({"ok": True, "num": 7, "list": [1, 2], "s": "x", "d": {"a": 1}, "nb": 3}
                                        if plain else Variables({n: Program(s) for n, s in VARS.items()}, context))
                print(f"{expr} | {bool(inline)} {index} {plain} | {outcome(program, context)}")
        print(f"{expr} | {bool(inline)} unbound | {outcome(program, Activation(CONTEXTS[0]))}")
"""


def outcomes(tree: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, tree], capture_output=True, text=True, check=True,
                          cwd=tree, timeout=1800)
    return done.stdout.splitlines()


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory(prefix="aiadmit-cel-") as scratch:
        base = outcomes(export(sys.argv[1], scratch))
        new = outcomes(export(sys.argv[2], scratch) if len(sys.argv) == 3 else ROOT)
    differing = [(a, b) for a, b in zip(base, new) if a != b]
    label = sys.argv[2] if len(sys.argv) == 3 else "the work tree"
    print(f"{len(base):,} outcomes of {sys.argv[1]}, {len(new):,} of {label}: "
          f"{len(differing) + abs(len(base) - len(new))} differ")
    for a, b in differing[:20]:
        print(f"  base {a}\n  new  {b}")
    return 1 if differing or len(base) != len(new) else 0


if __name__ == "__main__":
    sys.exit(main())
