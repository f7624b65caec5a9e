"""Enforcement: which action a finding carries, and which policies an object is exempt from.

Every entry point gets the same answer because it is decided here, once:
the config's action for the policy, lowered by the rule's own action and by
the namespace's enforcement label (a ceiling, never a raise); config
exceptions (by namespace, name and kind, with an expiry) and annotation
exemptions for the policies the config lets be exempted that way.
"""

from __future__ import annotations

import datetime as dt
from typing import Optional

from webhook.language.config import Config
from webhook.language.policy import ACTION_RANK, Policy, Rule
from webhook.model.findings import Evaluation
from webhook.model.resource import Resource


def lower(action: str, ceiling: Optional[str]) -> str:
    """`action`, lowered to `ceiling` when that ranks lower (audit < warn < deny); never raised."""
    if ceiling in ACTION_RANK and ACTION_RANK[ceiling] < ACTION_RANK[action]:
        return ceiling
    return action


class Enforcement:
    """The config's actions and exceptions, indexed for the policies an engine runs."""

    def __init__(self, config: Config, policies: list[Policy]):
        self.config = config
        self.actions = {p.id: config.settings(p.id).action or p.action for p in policies}
        self._exception_index: dict[tuple, tuple] = {}
        self._actions: dict[tuple, str] = {}  # (policy id, rule's action, ceiling) -> the action (few of them)

    def action(self, policy: Policy, rule: Rule, ceiling: Optional[str]) -> str:
        key = (policy.id, rule.action, ceiling)
        found = self._actions.get(key)
        if found is None:
            found = self.actions[policy.id]
            if rule.action:
                found = lower(found, rule.action)
            found = lower(found, ceiling)
            if len(self._actions) < 65536:  # the ceiling is a namespace label's value: bounded all the same
                self._actions[key] = found
        return found

    def observes_only(self, policy: Policy, ceiling: Optional[str]) -> bool:
        """Whether the policy is lowered to `audit` here: a mutation then changes nothing."""
        return lower(self.actions[policy.id], ceiling) == "audit"

    def exceptions_for(self, policy_id: str, namespace: str) -> tuple:
        """The config exceptions that can cover this policy in this namespace (memoised: few namespaces)."""
        key = (policy_id, namespace)
        found = self._exception_index.get(key)
        if found is None:
            found = tuple(e for e in self.config.exceptions if e.covers_namespace(policy_id, namespace))
            if len(self._exception_index) < 65536:
                self._exception_index[key] = found
        return found

    def exempt(self, policy_id: str, resource: Resource, evaluation: Evaluation) -> bool:
        """Whether a live exception or an allowed exemption annotation covers this object for this policy.

        An expired exception covers nothing and leaves a note saying so; one that applies is recorded in
        `evaluation.exemptions` (the webhook logs it with the review: docs/security.md).
        """
        exceptions = self.exceptions_for(policy_id, resource.namespace)
        if exceptions:
            today = dt.date.today()
            for exception in exceptions:
                if not exception.covers(policy_id, resource.namespace, resource.name, resource.kind):
                    continue
                if exception.expired(today):
                    note = f"exception {exception.name!r} for {policy_id} expired on {exception.expires}"
                    if note not in evaluation.notes:
                        evaluation.notes.append(note)
                    continue
                evaluation.exemptions.append(f"{policy_id}: exception {exception.name!r}")
                return True
        if policy_id in self.config.annotation_exemptable:
            listed = str(resource.annotations.get(self.config.exemption_annotation, ""))
            if policy_id in {p.strip() for p in listed.split(",")}:
                evaluation.exemptions.append(f"{policy_id}: annotation {self.config.exemption_annotation}")
                return True
        return False
