"""The audit adapter: inputs (files, stdin) -> resources -> engine -> an AuditResult for a report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from .engine import Engine
from .facts import ClusterFacts, OfflineFacts
from .findings import Evaluation, Finding
from .resource import InputError, Resource
from .sources import load_paths


@dataclass
class AuditResult:
    evaluations: list[Evaluation] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    skipped: list[InputError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [f for e in self.evaluations for f in e.findings]

    def exit_code(self, fail_on: str = "deny") -> int:
        """0 clean, 1 findings at or above `fail_on`, 2 input that could not be read or parsed."""
        if self.errors:
            return 2
        if fail_on == "never":
            return 0
        levels = {"deny": ("deny",), "warn": ("deny", "warn")}[fail_on]
        failing = any(f.action in levels and f.result in ("fail", "error") for f in self.findings)
        return 1 if failing else 0


def audit_resources(engine: Engine, resources: Iterable[Resource], facts: Optional[ClusterFacts] = None,
                    policies: Optional[set] = None, skip: Optional[set] = None) -> AuditResult:
    resources = list(resources)
    facts = facts if facts is not None else OfflineFacts(resources)
    result = AuditResult()
    for resource in resources:
        evaluation = engine.evaluate(resource, facts)
        if policies:
            evaluation.findings = [f for f in evaluation.findings if f.policy in policies]
            evaluation.policies = tuple(p for p in evaluation.policies if p in policies)
        if skip:
            evaluation.findings = [f for f in evaluation.findings if f.policy not in skip]
            evaluation.policies = tuple(p for p in evaluation.policies if p not in skip)
        result.evaluations.append(evaluation)
        result.errors += evaluation.errors
        for note in evaluation.notes:
            if note not in result.notes:
                result.notes.append(note)
    return result


def audit_paths(engine: Engine, paths: list[str], **kwargs) -> AuditResult:
    loaded = load_paths(paths)
    result = audit_resources(engine, loaded.resources, **kwargs)
    result.errors = loaded.errors + result.errors
    result.skipped = loaded.skipped
    return result
