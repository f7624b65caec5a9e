"""What an evaluation says: findings (one per failed or skipped rule at one field) and patches."""

from __future__ import annotations

from typing import Optional

from webhook.model import pointer as jp
from webhook.model.resource import InputError, Resource

RESULTS = ("fail", "skip", "error")


class Finding:
    """One rule's answer at one field. Slotted and built from positional arguments: a denied PyTorchJob makes 11 per
    evaluation, and a keyword call with an instance dict cost ~8,500 instructions each (bench/RESULTS.md, h-eval)."""

    __slots__ = ("policy", "rule", "action", "result", "message", "resource", "pointer")

    policy: str
    rule: str
    action: str  # deny | warn | audit, after config, namespace enforcement and exceptions
    result: str  # fail | skip | error (a rule that could not be evaluated fails closed at its action)
    message: str
    resource: Resource
    pointer: str

    def __init__(self, policy: str, rule: str, action: str, result: str, message: str, resource: Resource,
                 pointer: str = "") -> None:
        self.policy = policy
        self.rule = rule
        self.action = action
        self.result = result
        self.message = message
        self.resource = resource
        self.pointer = pointer

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


class Evaluation:
    """Everything the engine says about one resource."""

    resource: Resource
    findings: list[Finding]
    errors: list[InputError]
    notes: list[str]  # e.g. an expired exception
    classes: frozenset = frozenset()
    evaluated: bool = False  # False: excluded namespace or not a kind any policy matches
    policies: tuple = ()  # ids of the policies that applied (after match and exemptions): reports list passes
    exemptions: list[str]  # "policy: by what", for every exemption that applied

    def __init__(self, resource: Resource, findings: list[Finding] | None = None,
                 errors: list[InputError] | None = None, notes: list[str] | None = None,
                 classes: frozenset = frozenset(), evaluated: bool = False, policies: tuple = (),
                 exemptions: list[str] | None = None) -> None:
        self.resource = resource
        self.findings = [] if findings is None else findings
        self.errors = [] if errors is None else errors
        self.notes = [] if notes is None else notes
        self.classes = classes
        self.evaluated = evaluated
        self.policies = policies
        self.exemptions = [] if exemptions is None else exemptions

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


class Mutation:
    """JSON Patch operations (RFC 6902) for one resource and the policies that made them."""

    operations: list[dict]
    by_policy: dict[str, list[dict]]
    errors: list[str]
    patched: Optional[dict] = None

    def __init__(self, operations: list[dict] | None = None, by_policy: dict[str, list[dict]] | None = None,
                 errors: list[str] | None = None, patched: Optional[dict] = None) -> None:
        self.operations = [] if operations is None else operations
        self.by_policy = {} if by_policy is None else by_policy
        self.errors = [] if errors is None else errors
        self.patched = patched
