"""What one policy runs at one level, decided once per (policy, level, classes), and the checks made in Python.

A rule whose `when` starts with has() of an absent field is false whatever
else it says, so the engine tests those fields in Python and runs no CEL for
it. Which rules apply at a level depends only on the resource's classes and
whether its template has a pod spec: planned once per engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from webhook.k8s.workload import Container, PodTemplate
from webhook.language.policy import Policy, Rule


@dataclass(frozen=True)
class Plan:
    """What one policy runs at one level (object, pod, container) for resources of given classes.

    `rules` may apply there; `guarded`: some of them start with a has() test the engine makes in Python first.
    """

    rules: tuple
    guarded: bool

    @classmethod
    def of(cls, policy: Policy, level: str, classes: frozenset, has_spec: bool) -> "Plan":
        rules = tuple(rule for rule in policy.rules
                      if rule.target == level and not (rule.classes and not rule.classes <= classes)
                      and not (rule.needs_pod and not has_spec))
        return cls(rules=rules, guarded=any(rule.presence for rule in rules))

    def active(self, obj: dict, template: Optional[PodTemplate], container: Optional[Container]) -> tuple:
        """The rules whose has() guards hold on this object."""
        if not self.guarded:
            return self.rules
        return tuple(rule for rule in self.rules
                     if not (rule.presence and not present(rule.presence, obj, template, container)))


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
