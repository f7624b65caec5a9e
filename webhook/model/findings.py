"""What an evaluation says: findings (one per failed or skipped rule at one field) and patches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from webhook.model import pointer as jp
from webhook.model.resource import InputError, Resource

RESULTS = ("fail", "skip", "error")


@dataclass(repr=False, eq=False)
class Finding:
    policy: str
    rule: str
    action: str  # deny | warn | audit, after config, namespace enforcement and exceptions
    result: str  # fail | skip | error (a rule that could not be evaluated fails closed at its action)
    message: str
    resource: Resource
    pointer: str = ""

    @property
    def blocking(self) -> bool:
        return self.action == "deny" and self.result in ("fail", "error")

    def position(self) -> tuple[int, int]:
        return self.resource.origin.position(self.pointer)

    def key(self) -> tuple:
        """Identity of a violation across two versions of an object (UPDATE compares old and new)."""
        return (self.policy, self.rule, self.pointer, self.result)

    def as_dict(self) -> dict:
        line, column = self.position()
        return {
            "policy": self.policy,
            "rule": self.rule,
            "action": self.action,
            "result": self.result,
            "message": self.message,
            "resource": self.resource.ref(),
            "file": self.resource.origin.file,
            "line": line or None,
            "column": column or None,
            "path": self.pointer,
        }

    def field(self) -> str:
        return jp.to_dotted(self.pointer)


@dataclass(repr=False, eq=False)
class Evaluation:
    """Everything the engine says about one resource."""

    resource: Resource
    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. an expired exception
    classes: frozenset = frozenset()
    evaluated: bool = False  # False: excluded namespace or not a kind any policy matches
    policies: tuple = ()  # ids of the policies that applied (after match and exemptions): reports list passes
    exemptions: list[str] = field(default_factory=list)  # "policy: by what", for every exemption that applied

    @property
    def blocking(self) -> list["Finding"]:
        return [f for f in self.findings if f.blocking]

    def narrow(self, policies: Optional[set], skip: Optional[set]) -> "Evaluation":
        """Keep only what `--policy` (when given) selects and `--skip` does not; in place, returned for chaining."""
        if policies:
            self.findings = [f for f in self.findings if f.policy in policies]
            self.policies = tuple(p for p in self.policies if p in policies)
        if skip:
            self.findings = [f for f in self.findings if f.policy not in skip]
            self.policies = tuple(p for p in self.policies if p not in skip)
        return self

    def error_at(self, pointer: str, message: str) -> None:
        line, column = self.resource.origin.position(pointer)
        where = jp.to_dotted(pointer)
        text = f"{where}: {message}" if where else message
        self.errors.append(InputError(self.resource.origin.file or self.resource.describe(), line, text, column))


@dataclass(repr=False, eq=False)
class Mutation:
    """JSON Patch operations (RFC 6902) for one resource and the policies that made them."""

    operations: list[dict] = field(default_factory=list)
    by_policy: dict[str, list[dict]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    patched: Optional[dict] = None
