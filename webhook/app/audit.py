"""The audit adapter: inputs (files, stdin) -> resources -> engine -> an AuditResult for a report."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from webhook.engine.core import Engine
from webhook.model.facts import ClusterFacts, OfflineFacts
from webhook.model.findings import Evaluation, Finding
from webhook.model.resource import InputError, Resource
from webhook.app.parallel import audit_files
from webhook.app.parallel import can_fork, fork_map, payload, rebuild, shared
from webhook.inputs.sources import iter_manifest_files, load_paths


class AuditResult:
    evaluations: list[Evaluation]
    errors: list[InputError]
    skipped: list[InputError]
    notes: list[str]
    # What `prepare` (audit_paths) made of each evaluation, in the same order, where it was evaluated: a report's
    # per-object part, rendered by the worker process that held the object (webhook.outputs.reports.fragment).
    prepared: Optional[list] = None

    def __init__(self, evaluations: list[Evaluation] | None = None, errors: list[InputError] | None = None,
                 skipped: list[InputError] | None = None, notes: list[str] | None = None,
                 prepared: Optional[list] = None) -> None:
        self.evaluations = [] if evaluations is None else evaluations
        self.errors = [] if errors is None else errors
        self.skipped = [] if skipped is None else skipped
        self.notes = [] if notes is None else notes
        self.prepared = prepared

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


def _evaluate_slice(bounds: tuple[int, int]) -> list[tuple]:
    engine, resources, facts = shared()
    return [payload(engine.evaluate(resources[index], facts)) for index in range(*bounds)]


def evaluate_all(engine: Engine, resources: list[Resource], facts: ClusterFacts, jobs: int = 1) -> list[Evaluation]:
    """Evaluate every resource; with `jobs` > 1 and enough objects, in forked worker processes.

    For objects already in memory (a cluster listing); files are shared out
    before they are even loaded (webhook.app.parallel.audit_files).
    """
    if jobs <= 1 or len(resources) < PARALLEL_THRESHOLD or not can_fork():
        return [engine.evaluate(resource, facts) for resource in resources]
    results = fork_map((engine, resources, facts), _evaluate_slice, len(resources), jobs)
    return [rebuild(resource, data) for resource, data in zip(resources, results)]


def audit_resources(engine: Engine, resources: Iterable[Resource], facts: Optional[ClusterFacts] = None,
                    policies: Optional[set] = None, skip: Optional[set] = None, jobs: int = 1) -> AuditResult:
    resources = list(resources)
    facts = facts if facts is not None else OfflineFacts(resources)
    return _assemble(evaluate_all(engine, resources, facts, jobs), policies, skip)


def _assemble(evaluations: list[Evaluation], policies: Optional[set], skip: Optional[set]) -> AuditResult:
    result = AuditResult()
    for evaluation in evaluations:
        result.evaluations.append(evaluation.narrow(policies, skip))
        result.errors += evaluation.errors
        for note in evaluation.notes:
            if note not in result.notes:
                result.notes.append(note)
    return result


def audit_paths(engine: Engine, paths: list[str], policies: Optional[set] = None, skip: Optional[set] = None,
                jobs: int = 1, one_shot: bool = False,
                prepare: Optional[Callable[[Evaluation], Any]] = None) -> AuditResult:
    """Audit files. `one_shot`: this process ends after the audit, so loaded objects may be frozen out of the
    garbage collector's reach (sources.load_paths). `prepare`: called on each (narrowed) evaluation by the
    process that evaluated it, when files are shared out; its results are `result.prepared`."""
    files = list(iter_manifest_files(paths))
    parallel = audit_files(engine, files, jobs, prepare=prepare, narrow=(policies, skip))
    if parallel is not None:
        loaded, evaluations, prepared = parallel
        result = _assemble(evaluations, policies, skip)
        result.prepared = prepared
    else:
        loaded = load_paths(files, freeze=one_shot)
        result = audit_resources(engine, loaded.resources, policies=policies, skip=skip, jobs=jobs)
    result.errors = loaded.errors + result.errors
    result.skipped = loaded.skipped
    return result
