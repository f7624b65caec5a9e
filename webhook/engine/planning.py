"""What one policy runs at one level, decided once per (policy, level, classes), and the checks made in Python.

A rule whose `when` starts with has() of an absent field is false whatever
else it says, so the engine tests those fields in Python and runs no CEL for
it; the rules that read no cluster fact run as one verdict program when all
of them are active. Neither depends on the object's fields, only on its
classes and whether its template has a pod spec: planned once per engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from webhook.k8s.workload import Container, PodTemplate
from webhook.language.policy import Policy, Rule


@dataclass(frozen=True)
class Plan:
    """What one policy runs at one level (object, pod, container) for resources of given classes.

    `rules` may apply there; `guarded`: some of them start with a has() test the engine makes in Python first.
    When all of them are active, `simple` are those one verdict program (`verdicts`) answers and `rest` the ones
    that run alone (they read cluster facts, or are JSON Schema rules).
    """

    rules: tuple
    guarded: bool
    simple: tuple
    verdicts: Optional[Any]
    rest: tuple

    @classmethod
    def of(cls, policy: Policy, level: str, classes: frozenset, has_spec: bool) -> "Plan":
        rules = tuple(rule for rule in policy.rules
                      if rule.target == level and not (rule.classes and not rule.classes <= classes)
                      and not (rule.needs_pod and not has_spec))
        return cls.split(policy, rules, guarded=any(rule.presence for rule in rules))

    @classmethod
    def split(cls, policy: Policy, rules: tuple, guarded: bool = False) -> "Plan":
        """`rules` parted into those one verdict program answers and those that run alone."""
        simple = tuple(rule for rule in rules if rule.expression is not None and not rule.requires)
        return cls(rules=rules, guarded=guarded, simple=simple,
                   verdicts=policy.verdicts(simple) if simple else None,
                   rest=tuple(rule for rule in rules if rule.expression is None or rule.requires))

    def active(self, policy: Policy, obj: dict, template: Optional[PodTemplate],
               container: Optional[Container]) -> "Plan":
        """The plan for the rules whose has() guards hold on this object (itself when all of them do)."""
        if not self.guarded:
            return self
        active = tuple(rule for rule in self.rules
                       if not (rule.presence and not present(rule.presence, obj, template, container)))
        if len(active) == len(self.rules):
            return self
        return Plan.split(policy, active)


def present(presence: tuple, obj: dict, template: Optional[PodTemplate], container: Optional[Container]) -> bool:
    """Whether every (variable, field path) exists, as CEL's has() would see it."""
    for variable, path in presence:
        if variable == "container":
            node = container.obj if container else None
        elif variable == "pod":
            node = template.spec if template else None
        elif variable == "podMeta":
            node = template.metadata if template else None
        else:
            node = obj
        for name in path:
            if not isinstance(node, dict) or name not in node:
                return False
            node = node[name]
    return True


def missing_facts(rule: Rule, cluster: Optional[dict]) -> list[str]:
    """The cluster facts a rule requires that nobody could supply for this resource."""
    known = cluster or {}
    return [fact for fact in rule.requires if known.get(fact) is None]


def where(base: str, container: Optional[Container], path: str) -> str:
    """Pointer of a finding: computed only for findings, never for passing rules."""
    return container.field_pointer(path) if container else base + path
