"""Work shared out to forked processes, and evaluations carried back as plain data.

Evaluating is CPU-bound Python, so one process uses one core. Forking after the
inputs are loaded lets every worker read them (and the compiled policies)
without pickling anything on the way in; only findings come back, as tuples,
and are rebuilt around the parent's own Resource objects.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any, Callable

from .findings import Evaluation, Finding
from .resource import Resource

_SHARED: Any = None  # what the workers read, set only while a pool runs


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def shared() -> Any:
    return _SHARED


def fork_map(state: Any, work: Callable[[tuple[int, int]], list], count: int, jobs: int) -> list:
    """`work((start, end))` over `count` items in `jobs` forked processes; the results, concatenated in order."""
    global _SHARED
    _SHARED = state
    try:
        step = max(1, -(-count // (jobs * 4)))
        slices = [(start, min(start + step, count)) for start in range(0, count, step)]
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            parts = pool.map(work, slices)
    finally:
        _SHARED = None
    return [item for part in parts for item in part]


def payload(evaluation: Evaluation) -> tuple:
    """An evaluation as plain picklable data, without its resource."""
    findings = [(f.policy, f.rule, f.action, f.result, f.message, f.pointer) for f in evaluation.findings]
    return (findings, evaluation.errors, evaluation.notes, evaluation.classes, evaluation.evaluated,
            evaluation.policies)


def rebuild(resource: Resource, data: tuple) -> Evaluation:
    findings, errors, notes, classes, evaluated, applied = data
    evaluation = Evaluation(resource, errors=errors, notes=notes, classes=classes, evaluated=evaluated,
                            policies=applied)
    evaluation.findings = [Finding(policy, rule, action, result, message, resource, pointer)
                           for policy, rule, action, result, message, pointer in findings]
    return evaluation
