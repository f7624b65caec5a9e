"""The audit adapter: inputs (files, stdin) -> resources -> engine -> an AuditResult for a report."""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .engine import Engine
from .facts import ClusterFacts, OfflineFacts
from .findings import Evaluation, Finding
from .resource import InputError, Resource
from .fileaudit import audit_files
from .sources import iter_manifest_files, load_paths


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


# Below this many objects a second process costs more than it saves (fork, result transfer).
PARALLEL_THRESHOLD = 400
_SHARED: tuple = ()  # (engine, resources, facts), inherited by forked workers: nothing is pickled on the way in


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _evaluate_slice(bounds: tuple[int, int]) -> list[tuple]:
    engine, resources, facts = _SHARED
    out = []
    for index in range(*bounds):
        evaluation = engine.evaluate(resources[index], facts)
        out.append((index, [(f.policy, f.rule, f.action, f.result, f.message, f.pointer) for f in evaluation.findings],
                    evaluation.errors, evaluation.notes, evaluation.classes, evaluation.evaluated,
                    evaluation.policies))
    return out


def evaluate_all(engine: Engine, resources: list[Resource], facts: ClusterFacts, jobs: int = 1) -> list[Evaluation]:
    """Evaluate every resource; with `jobs` > 1 and enough objects, in forked worker processes.

    An audit of a repository or a cluster is embarrassingly parallel once the
    cluster facts are built from the whole input, and the GIL keeps one process
    on one core. Workers are forked after loading, so they share the loaded
    objects, the compiled policies and the facts; only findings come back, and
    they are rebuilt around the parent's resources (whose YAML nodes give lines).
    """
    if jobs <= 1 or len(resources) < PARALLEL_THRESHOLD or "fork" not in multiprocessing.get_all_start_methods():
        return [engine.evaluate(resource, facts) for resource in resources]
    global _SHARED
    _SHARED = (engine, resources, facts)
    try:
        step = -(-len(resources) // (jobs * 4))
        slices = [(start, min(start + step, len(resources))) for start in range(0, len(resources), step)]
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            parts = pool.map(_evaluate_slice, slices)
    finally:
        _SHARED = ()
    evaluations = []
    for part in parts:
        for index, findings, errors, notes, classes, evaluated, applied in part:
            resource = resources[index]
            evaluation = Evaluation(resource, errors=errors, notes=notes, classes=classes, evaluated=evaluated,
                                    policies=applied)
            evaluation.findings = [Finding(policy, rule, action, result, message, resource, pointer)
                                   for policy, rule, action, result, message, pointer in findings]
            evaluations.append(evaluation)
    return evaluations


def audit_resources(engine: Engine, resources: Iterable[Resource], facts: Optional[ClusterFacts] = None,
                    policies: Optional[set] = None, skip: Optional[set] = None, jobs: int = 1) -> AuditResult:
    resources = list(resources)
    facts = facts if facts is not None else OfflineFacts(resources)
    return _assemble(evaluate_all(engine, resources, facts, jobs), policies, skip)


def _assemble(evaluations: list[Evaluation], policies: Optional[set], skip: Optional[set]) -> AuditResult:
    result = AuditResult()
    for evaluation in evaluations:
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


def audit_paths(engine: Engine, paths: list[str], policies: Optional[set] = None, skip: Optional[set] = None,
                jobs: int = 1) -> AuditResult:
    files = list(iter_manifest_files(paths))
    parallel = audit_files(engine, files, jobs)
    if parallel is not None:
        loaded, evaluations = parallel
        result = _assemble(evaluations, policies, skip)
    else:
        loaded = load_paths(files)
        result = audit_resources(engine, loaded.resources, policies=policies, skip=skip, jobs=jobs)
    result.errors = loaded.errors + result.errors
    result.skipped = loaded.skipped
    return result
