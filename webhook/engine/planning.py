"""What one policy runs at one level, decided once per (policy, level, classes), and the checks made in Python.

A rule whose `when` has a top-level has() of an absent field (or an
exists(v, has(v.f)) over a list none of whose maps holds f) is false whatever
else it says, so the engine tests those in Python and runs no CEL for it.
Which rules apply at a level depends only on the resource's classes and
whether its template has a pod spec: planned once per engine.
"""

from __future__ import annotations

from typing import Callable, Optional

from webhook.k8s.workload import Container, PodTemplate
from webhook.language.policy import Policy, Rule
from webhook.model.valueclass import Compared, Frozen


class Step:
    """One rule as the engine runs it: the compiled programs' functions themselves, so that a rule that needs no
    cluster fact and checks an expression (`inline`) runs in the engine's loop with no call but the programs'.

    Each function is fetched from its Expression at the rule's first run (`when`/`check` start as a stand-in that
    compiles, keeps the program's function in its place and runs it): nothing is compiled that never runs."""

    __slots__ = ("rule", "inline", "when", "check", "unknown")

    def __init__(self, rule: Rule):
        self.rule = rule
        # a rule requiring cluster facts: what it decides for each tuple of missing facts (engine/running.py; the
        # step belongs to one engine, whose config fixes the answer)
        self.unknown: dict = {}
        self.inline = not rule.requires and rule.expression is not None  # else engine/running.py `run_rule`
        self.when = _fetched(self, "when", rule.when) if rule.when is not None else None
        self.check = _fetched(self, "check", rule.expression) if rule.expression is not None else None


def _fetched(step: Step, name: str, expression) -> Callable:
    def first(context):
        function = expression.program.execute  # compiled now, once; the Expression keeps the program too
        setattr(step, name, function)
        return function(context)
    return first


class Plan(Frozen, Compared):
    """What one policy runs at one level (object, pod, container) for resources of given classes.

    `rules` may apply there, `steps` the same rules as the engine runs them; `guarded`: some of them start with a
    has() test the engine makes in Python first. `checks` are the distinct (variable, field path) those tests read,
    each tested once per run however many rules share it; `chosen` remembers, for each outcome of them (a bit mask),
    which steps it leaves.
    """

    rules: tuple
    guarded: bool
    checks: tuple = ()
    needs: tuple = ()  # per rule, the bit mask of the checks it requires
    chosen: dict
    held: Optional[Callable] = None  # (obj, pod, podMeta, container) -> the bits
    # Some rule here reads the policy's named `variables` (and it has some): only then are they bound (a policy
    # whose container rules read none, image-digest, pays nothing per container for its pod-level ones).
    binds: bool = True
    steps: tuple = ()

    def __init__(self, rules: tuple, guarded: bool, checks: tuple = (), needs: tuple = (), chosen: dict | None = None,
                 held: Optional[Callable] = None, binds: bool = True, steps: tuple = ()) -> None:
        object.__setattr__(self, "rules", rules)
        object.__setattr__(self, "guarded", guarded)
        object.__setattr__(self, "checks", checks)
        object.__setattr__(self, "needs", needs)
        object.__setattr__(self, "chosen", {} if chosen is None else chosen)
        object.__setattr__(self, "held", held)
        object.__setattr__(self, "binds", binds)
        object.__setattr__(self, "steps", steps)

    def _compared(self) -> tuple:
        """The fields `==` compares and the hash digests."""
        return (self.rules, self.guarded, self.checks, self.needs, self.binds)

    @classmethod
    def of(cls, policy: Policy, level: str, classes: frozenset, has_spec: bool) -> "Plan":
        rules = tuple(rule for rule in policy.rules
                      if rule.target == level and not (rule.classes and not rule.classes <= classes)
                      and not (rule.needs_pod and not has_spec))
        checks = tuple(dict.fromkeys(check for rule in rules for check in rule.presence))
        needs = tuple(sum(1 << checks.index(check) for check in set(rule.presence)) for rule in rules)
        return cls(rules=rules, guarded=bool(checks), checks=checks, needs=needs,
                   held=_held(checks) if checks else None,
                   binds=bool(policy.named) and any("variables" in rule.variables for rule in rules),
                   steps=tuple(Step(rule) for rule in rules))

    def running(self, held: int) -> tuple:
        """The steps whose has() guards hold, given the bits `held` answered (the engine asks `chosen` first)."""
        found = self.chosen.get(held)
        if found is None:
            found = tuple(step for step, need in zip(self.steps, self.needs) if need & held == need)
            if len(self.chosen) < 256:  # bounded: a policy with many guards has few outcomes that occur
                self.chosen[held] = found
        return found

    def active(self, obj: dict, template: Optional[PodTemplate], container: Optional[Container]) -> tuple:
        """The rules whose has() guards hold on this object."""
        if not self.guarded:
            return self.rules
        held = self.held(obj, template.spec if template else None, template.metadata if template else None,
                         container.obj if container else None)
        return tuple(step.rule for step in self.running(held))


class Place:
    """The (policy, plan) entries that run at one kind of place (the object, a template's pod spec, a container of
    one section), with the has() tests of all their plans made by one function (`held`: a test that several plans
    share, `has(container.resources)`, is made once) and, for each outcome (a bit mask), what runs: `(runs,
    trailing)`, runs the (policy, whether its variables are bound, steps) of the policies left with some rule, in
    order; trailing, whether policies with nothing to run follow the last of them (the engine checks the deadline
    before each policy that runs and once for those: the checks it made one after another, with nothing between
    them, before this was kept per place)."""

    __slots__ = ("entries", "checks", "held", "chosen", "always", "reads")

    def __init__(self, entries: tuple):
        self.entries = entries
        self.checks = tuple(dict.fromkeys(check for _, plan in entries for check in plan.checks))
        self.held = _held(self.checks) if self.checks else None  # (obj, pod, podMeta, container) -> the bits
        self.chosen: dict = {}
        self.always = None if self.checks else self.runs(0)  # no tests: the one outcome
        self.reads: dict = {}  # id(runs) -> (runs, what their conditions read per place): engine/sharing.py

    def runs(self, held: int) -> tuple:
        found = self.chosen.get(held)
        if found is None:
            runs, last = [], -1
            for position, (policy, plan) in enumerate(self.entries):
                bits = sum(1 << i for i, check in enumerate(plan.checks) if held >> self.checks.index(check) & 1)
                steps = plan.running(bits) if plan.guarded else plan.steps
                if steps:
                    runs.append((policy, plan.binds, steps))
                    last = position
            found = (tuple(runs), last < len(self.entries) - 1)
            if len(self.chosen) < 256:  # bounded, as a plan's
                self.chosen[held] = found
        return found


_ROOTS = {"container": "c", "pod": "p", "podMeta": "m"}  # any other variable: the object itself


def _held(checks: tuple) -> Callable:
    """One Python function that tests every (variable, field path) of `checks` as CEL's has() sees it (each step a
    map that holds the next name) and answers bit i set when check i holds: no loop and no call per check. A check
    (variable, field path, f) is `path.exists(v, has(v.f))` (language/guards.py): its bit is clear only where CEL
    would answer false without an error (a list of maps, none holding f). The caller passes the pod spec, its
    metadata and the container object (None where there is none), read once for all the plans at one place.

    Generated from the plan's own field names (each written as a Python literal by repr), compiled once per plan."""
    lines = ["def held(obj, p, m, c):",  # the object, the pod spec, its metadata, the container (None: absent)
             "    bits = 0"]
    for bit, (variable, path, *field) in enumerate(checks):
        node, tests = _ROOTS.get(variable, "obj"), []
        for name in path:
            tests.append(f"isinstance({node}, dict) and {name!r} in {node}")
            node = f"{node}[{name!r}]"
        if field:  # exists(v, has(v.f)): cleared only when the path is a list of maps none of which holds f
            tests = [f"not ({' and '.join(tests)} and isinstance({node}, list) and "
                     f"all(isinstance(v, dict) and {field[0]!r} not in v for v in {node}))"]
        lines.append(f"    if {' and '.join(tests) or 'True'}: bits |= {1 << bit}")
    lines.append("    return bits")
    namespace: dict = {}
    exec(compile("\n".join(lines), "<presence checks>", "exec"), namespace)  # our own source, from field names
    return namespace["held"]


def where(base: str, container: Optional[Container], path: str) -> str:
    """Pointer of a finding: computed only for findings, never for passing rules."""
    return container.field_pointer(path) if container else base + path
