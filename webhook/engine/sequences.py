"""The rules that run at one place, for one outcome of its has() tests, as ONE generated Python function.

engine/running.py ran them in a loop over (policy, steps) and over each policy's steps, fetching from each step
whether it runs inline, its `when` and its `check` (PyTorchJob of bench/engine.py: ~70 steps per evaluation, the
loop's own bytecode ~7 % of an evaluation's). The function generated here makes the same calls in the same order,
with nothing between them but the tests of their results: per policy the deadline check (before every policy but
the first, which the caller's binding follows) and its fresh named `variables`; per inline step (no cluster fact,
an expression: planning.Step) `when`, then `check`, a finding for a failure and an `error` one for an exception; any
other step through `run_rule`. A step's `when`/`check` are read from the step at each run, as the loop read them (a
step keeps its program's function in place of its first-run stand-in).

The source depends only on the outcome's shape (how many policies, which bind variables, each step's kind), never on
a policy's text: it is compiled once per shape and each outcome gets its own closure over its policies and steps.
"""

from __future__ import annotations

from typing import Callable

_SHAPES: dict = {}  # shape -> the compiled `make` (bounded: shapes repeat across places and resources)


def compile_runs(runs: tuple, trailing: bool, parts: dict) -> Callable:
    """The function running `runs` ((policy, binds, steps) of planning.Place) and, when `trailing`, the deadline
    check for the policies with nothing to run after them. `parts` are the functions it calls (engine/running.py):
    bound, add, run_rule, where, check_deadline, Variables.

    It is called as run(engine, context, scope, template, container, position, base, deadline)."""
    shape = (tuple((binds, tuple(_kind(step) for step in steps)) for _, binds, steps in runs), trailing)
    make = _SHAPES.get(shape)
    if make is None:
        make = _make(shape)
        if len(_SHAPES) < 4096:
            _SHAPES[shape] = make
    policies = tuple(policy for policy, _, _ in runs)
    steps = tuple(step for _, _, group in runs for step in group)
    return make(policies, steps, tuple(step.rule for step in steps), **parts)


def _kind(step) -> str:
    if not step.inline:
        return "rule"
    return "when" if step.when is not None else "check"


def _make(shape: tuple) -> Callable:
    groups, trailing = shape
    count = sum(len(kinds) for _, kinds in groups)
    lines = ["def make(P, S, R, bound, add, run_rule, where, check_deadline, Variables):"]
    if groups:
        lines.append(f"    {''.join(f'p{i}, ' for i in range(len(groups)))}= P")
        lines.append(f"    {''.join(f's{i}, ' for i in range(count))}= S")
        lines.append(f"    {''.join(f'r{i}, ' for i in range(count))}= R")
    lines.append("    def run(engine, context, scope, template, container, position, base, deadline):")
    body = []
    index = 0
    for group, (binds, kinds) in enumerate(groups):
        body.append("if deadline is not None: check_deadline(deadline)")
        if group == 0:  # the context is bound on the first policy that runs here, after its deadline check
            body.append("target = bound(engine, context, scope, template, container, position)")
        if binds:  # a fresh set of the policy's named variables (binding.bind_variables)
            body.append(f"context['variables'] = Variables(p{group}.named, context)")
        for kind in kinds:
            p, s, r = f"p{group}", f"s{index}", f"r{index}"
            if kind == "rule":
                body.append(f"run_rule(engine, context, scope, {p}, {s}, base, container, target)")
            else:
                test = f"{s}.when(context) is True and {s}.check(context) is not True" if kind == "when" \
                    else f"{s}.check(context) is not True"
                body += ["try:",
                         f"    if {test}:",
                         f"        add(engine, scope, {p}, {r}, 'fail', {r}.message.render(context), "
                         f"where(base, container, {r}.path))",
                         "except Exception as exc:",  # a rule that cannot be evaluated fails closed, with the reason
                         f"    add(engine, scope, {p}, {r}, 'error', f'rule could not be evaluated: {{exc}}', "
                         f"where(base, container, {r}.path))"]
            index += 1
    if trailing:
        body.append("if deadline is not None: check_deadline(deadline)")
    lines += ["        " + line for line in body or ["pass"]]
    lines.append("    return run")
    namespace: dict = {}
    exec(compile("\n".join(lines), "<rules at a place>", "exec"), namespace)  # our own source, from counts only
    return namespace["make"]
