"""Places alike in all their rules' conditions read: the rules' outcomes of the first, replayed at the next.

Why: a PyTorchJob's Master and Worker templates are most often the same pod, and each of their containers met the
same ~40 CEL programs: half of the evaluation ran programs whose answers were already known (bench/RESULTS.md,
h-share). A rule's `when` and `expression` are CEL, pure functions of the variables bound when they run, and the
cluster facts a rule requires are the resource's; so where the same place of a later template (its pod spec; its
container of the same name) binds the same data for every name those conditions read (through the policy's named
variables too), every rule decides as it did at the earlier one, and only the findings are made again: each at its
own pointer, a failed check's message rendered where it is (a message may name the template or the container, which
the conditions need not read), an error's text as it was, a schema rule's schema checked on this place's object.

"The same data" is exact, not Python's `==`: the same types throughout (1, 1.0 and true are three CEL values), the
same keys in the same order (iteration order shows in lists built from maps), a double by its bits (-0.0 is not
0.0; NaN is never equal). Anything not plain JSON data is never the same. Only the last outcomes of each place
are kept, so the comparison is linear in the object however many templates it has.
"""

from __future__ import annotations

import marshal
from typing import Any, Optional

from webhook.cel.constants import WHOLE

# What engine/binding.py `enter` binds per place; everything else a condition may read is bound once per resource
# (binding.bind_resource), or is the policy's fresh `variables`, computed from these.
PLACE = frozenset({"pod", "podMeta", "template", "templateDevices", "podResources", "podClaims", "container",
                   "containerType", "containerName", "injected", "envFrom", "claims"})
RESOURCE = frozenset({"workload", "object", "oldObject", "request", "namespaceObject", "claimDevices", "cluster",
                      "templates", "variables"})
class Kept:
    """What one evaluation keeps while it walks a resource's templates: each place's last outcomes (by slot:
    id(Place), with the container's name for a container's place) and the pairs of maps already compared."""

    __slots__ = ("last", "pairs")

    def __init__(self):
        self.last: dict = {}
        self.pairs: dict = {}


FAIL = object()  # an outcome (engine/running.py): the check answered false, a finding with the rule's message
SCHEMA = object()  # an outcome: a schema rule applies, its schema is checked where the outcome is replayed


def reads(runs: tuple) -> Optional[tuple]:
    """The per-place names the rules' conditions (`when`, `expression`) read, sorted; None when one of them reads a
    name that is neither per place nor per resource (nothing is then shared)."""
    names: set = set()
    for policy, _, steps in runs:
        named = _named_reads(policy.named)
        for step in steps:
            rule = step.rule
            # (the facts a rule requires are `cluster`'s, per resource; a schema is checked where it is replayed)
            for expression in (rule.when, rule.expression):
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
    """Whether two places' values of the same names are the same data (the module's docstring says how exact).
    `known` keeps, for this evaluation, the answer for each pair of maps compared (a container's place compares its
    pod spec again, and the container is in it), with the pair itself: an id is never reused while it is kept."""
    try:
        if first != second:  # Python's `==` first, in C: most places that differ differ there
            return False
        for a, b in zip(first, second):
            if a is b:
                continue
            kind = type(a)
            if kind is not type(b):
                return False
            if kind is str or kind is int or kind is bool:
                continue
            if kind is float:
                if repr(a) != repr(b):
                    return False
                continue
            if kind is not dict and kind is not list:
                return False  # not plain data
            if not a:  # empty, and of the same type
                continue
            found = known.get((id(a), id(b)))
            if found is None:
                found = (same(a, b, known), a, b)
                known[id(a), id(b)] = found
            if not found[0]:
                return False
    except RecursionError:  # nested deeper than Python follows: not known to be the same
        return False
    return True


def worth(templates: list) -> bool:
    """Whether some template's first container is equal (by `==`) to the next template's: only then are outcomes
    kept (a RayCluster's head and workers, which differ, pay nothing for what could not be replayed)."""
    for before, after in zip(templates, templates[1:]):
        if before.containers and after.containers and before.containers[0].obj == after.containers[0].obj:
            return True
    return False


def same(a: Any, b: Any, known: dict) -> bool:
    """Whether `a` and `b`, which are equal by Python's `==`, are the same JSON data: the same types throughout, keys
    in the same order, a double by its bits. Asked of marshal's writing of both (version 2, which has no
    back-references: the bytes depend on the values alone), in C: marshal writes each value with its exact type
    (bool apart from int, int from float, a str or dict subclass not at all), a map's entries in their order and a
    double's 8 bytes, and refuses what it cannot write. (A buffer object would be written as bytes; no decoder
    makes one.) Where two maps are the same, so are their maps and their lists' maps one level down (a pod spec's
    containers): each such pair is kept in `known`, which a container's place then finds. The walk in Python this
    replaces cost a decoded PyTorchJob review's pod specs twice as many instructions (bench/RESULTS.md, h-eval)."""
    try:
        found = marshal.dumps(a, 2) == marshal.dumps(b, 2)
    except (ValueError, RecursionError):  # not plain data, or nested deeper than marshal writes
        return False
    if found and type(a) is dict:
        for x, y in zip(a.values(), b.values()):
            if type(x) is dict:
                known[id(x), id(y)] = (True, x, y)
            elif type(x) is list:
                for p, q in zip(x, y):
                    if type(p) is dict:
                        known[id(p), id(q)] = (True, p, q)
    return found
