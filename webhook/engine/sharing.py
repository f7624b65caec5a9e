"""Places alike in all their rules' conditions read: the rules' outcomes of the first, replayed at the next.

Why: a PyTorchJob's Master and Worker templates are most often the same pod, and each of their containers met the
same ~40 CEL programs: half of the evaluation ran programs whose answers were already known (bench/RESULTS.md,
h-share). A rule's `when` and `expression` are CEL, pure functions of the variables bound when they run; so where a
place (a pod spec, a container) of the same kind follows one whose bound values each of those conditions reads
(through the policy's named variables too) are the same data, every condition answers as it did there, and only
the findings are made again: each at its own pointer, its message rendered where it is (a message may name the
template or the container, which the conditions need not read). An error's text is kept with the outcome; a rule
that requires cluster facts or checks a schema (engine/running.py `run_rule`) runs again.

"The same data" is exact, not Python's `==`: the same types throughout (1, 1.0 and true are three CEL values), the
same keys in the same order (iteration order shows in lists built from maps), a double by its repr (-0.0 is not
0.0; NaN is never equal). Anything not plain JSON data is never the same. Only the last place of each kind is
kept, so the comparison is linear in the object however many places it has.
"""

from __future__ import annotations

from typing import Any, Optional

from webhook.cel.checker import WHOLE

# What engine/binding.py `enter` binds per place; everything else a condition may read is bound once per resource
# (binding.bind_resource), or is the policy's fresh `variables`, computed from these.
PLACE = frozenset({"pod", "podMeta", "template", "templateDevices", "podResources", "podClaims", "container",
                   "containerType", "containerName", "injected", "envFrom", "claims"})
RESOURCE = frozenset({"workload", "object", "oldObject", "request", "namespaceObject", "claimDevices", "cluster",
                      "templates", "variables"})
FAIL = object()  # a recorded outcome: the check answered false (a finding with the rule's message)
RUN = object()  # a rule run_rule runs: run again (cluster facts, a schema)


def reads(runs: tuple) -> Optional[tuple]:
    """The per-place names the conditions whose answers are kept read (an inline step's `when` and `expression`,
    the early `when` of a rule that requires cluster facts), sorted; None when one of them reads a name that is
    neither per place nor per resource (nothing is then shared)."""
    names: set = set()
    for policy, _, steps in runs:
        named = _named_reads(policy.named)
        for step in steps:
            rule = step.rule
            if step.inline:
                asked = (rule.when, rule.expression)
            elif rule.requires and rule.early:  # its `when`'s answer is kept (engine/running.py `applying`)
                asked = (rule.when,)
            else:  # run again where it is replayed
                continue
            for expression in asked:
                if expression is None:
                    continue
                found = set(expression.variables)
                if "variables" in found:
                    for name in (named if WHOLE in expression.named else expression.named):
                        found |= named.get(name, frozenset())
                names |= found
    if names - PLACE - RESOURCE:
        return None
    return tuple(sorted(names & PLACE))


def _named_reads(named: dict) -> dict:
    """name -> the variables computing that named variable reads, those of the named variables it reads included
    (each reads only earlier ones, so one pass in order is transitive; reading `variables` whole, all of them)."""
    every = frozenset().union(*(expression.variables for expression in named.values()))
    found: dict = {}
    for name, expression in named.items():
        if WHOLE in expression.named:
            found[name] = every
        else:
            found[name] = expression.variables.union(*(found[n] for n in expression.named if n in found))
    return found


def alike(first: tuple, second: tuple, known: dict) -> bool:
    """Whether two places' values of the same names are the same data (the module's docstring says how exact);
    `known` keeps the answers for pairs of objects compared (a container's place compares its pod spec again)."""
    try:
        for a, b in zip(first, second):
            if a is b:
                continue
            key = (id(a), id(b))  # both are bound in this evaluation's places, alive until it ends
            found = known.get(key)
            if found is None:
                found = known[key] = a == b and strict(a, b)
            if not found:
                return False
    except RecursionError:  # nested deeper than Python follows: not known to be the same
        return False
    return True


def strict(a: Any, b: Any) -> bool:
    """Whether `a` and `b`, which are equal by Python's `==`, are the same JSON data: the same types throughout,
    keys in the same order, a double by its repr. (Their parts are equal by `==` too, so only that is asked.)"""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            if type(ka) is not str or type(kb) is not str or ka != kb:
                return False
            if va is not vb and not strict(va, vb):
                return False
        return True
    if kind is list:
        for x, y in zip(a, b):
            if x is not y and not strict(x, y):
                return False
        return True
    if kind is str or kind is int or kind is bool or a is None:
        return True
    if kind is float:
        return repr(a) == repr(b)
    return False  # anything else is not plain data
