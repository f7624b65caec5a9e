"""Audits on every core: work shared out to forked processes, evaluations carried back as plain data.

Evaluating is CPU-bound Python, so one process uses one core. Forking after the
inputs are read lets every worker see them (and the compiled policies) without
pickling anything on the way in; only plain data comes back (findings as
tuples, report fragments as text) through the pool, and evaluations are
rebuilt around resources of the parent's own.

Files (`audit_files`): loading (libyaml plus Python object building) is
CPU-bound too, so each worker loads its own share. Files are independent except
for the cluster facts an offline audit takes from the whole input (Namespaces, ConfigMaps, Secrets,
ResourceQuotas, PriorityClasses, RuntimeClasses). Those kinds are rare, so the
parent finds the files that may hold them with a cheap text scan (a superset:
a false hit only costs loading that file twice), loads just those to build the
facts, then forks workers that each load and evaluate a contiguous share of the
files and send back plain findings with their line and column already resolved.
An HPA in the input needs its target, which may be in any file: then the audit
runs in one process, as it would without `--jobs`.
"""

from __future__ import annotations

import gc
import os
import re
from typing import Any, Callable, Optional

from webhook.engine.core import Engine
from webhook.inputs.sources import Loaded, load_text, read_text
from webhook.model.facts import OfflineFacts
from webhook.model.findings import Evaluation, Finding
from webhook.model.resource import Origin, Resource
from webhook.model.lazyre import Lazy

_SHARED: Any = None  # what the workers read, set only while a pool runs
_WORK: Any = None  # the function each slice runs


def default_jobs() -> int:
    """`-j`'s default: the cores this process may run on that other work is not already using, at least 1.

    A second worker only pays when it gets a core of its own: on a busy machine (CI runners, a developer's build)
    the workers and the parent's serial share (reading, the fact scan, reading results back) queue for the same
    cores and the run takes longer than in one process (bench/RESULTS.md, issue 25). The busy cores are the
    one-minute load average, rounded; whether the input is large enough to share out is decided later, by its size
    (MIN_BYTES_PER_JOB).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        busy = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this platform: every core
        busy = 0.0
    return max(1, min(cores, int(cores - busy + 0.5)))


def can_fork() -> bool:
    import multiprocessing  # here, not at the top: a one-file audit (the pre-commit hook's) never forks

    return "fork" in multiprocessing.get_all_start_methods()


def shared() -> Any:
    return _SHARED


def fork_map(state: Any, work: Callable[[tuple[int, int]], list], count: int, jobs: int) -> list:
    """`work((start, end))` over `count` items in `jobs` forked processes; the results, concatenated in order."""
    import multiprocessing

    global _SHARED, _WORK
    _SHARED, _WORK = state, work
    try:
        step = max(1, -(-count // (jobs * 4)))
        slices = [(start, min(start + step, count)) for start in range(0, count, step)]
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            results = pool.map(_run_slice, slices)
        return [item for result in results for item in result]
    finally:
        _SHARED = _WORK = None


def _run_slice(bounds: tuple[int, int]) -> list:
    return _WORK(bounds)


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


# ---------------------------------------------------------------------- files
# A file worth more than this many bytes of text per process before forking pays.
MIN_BYTES_PER_JOB = 128 * 1024
_DOCUMENT_START = Lazy(r"^---(?=[ \t\r\n]|$)", re.M)
# Every kind model/facts.py's OfflineFacts reads (tests/test_parallel_files.py: the workers' answer is one process's).
# A document naming a ResourceClaim is a fact too: who else uses that claim (untrusted-gpu-isolation).
_CLAIM_USER = "resourceClaimName"
_FACT_NAMES = ("Namespace", "ResourceQuota", "PriorityClass", "RuntimeClass", "HorizontalPodAutoscaler",
               "ScaledObject", "ConfigMap", "Secret", "Node", "LocalQueue", "PodGroup", "ResourceClaim",
               _CLAIM_USER)
_FACT_KIND = Lazy(r"""\bkind["']?\s*:\s*(?:!!str\s+)?["']?"""
                        r"""(Namespace|ResourceQuota|PriorityClass|RuntimeClass|HorizontalPodAutoscaler"""
                        r"""|ScaledObject|ConfigMap|Secret|Node|LocalQueue|PodGroup|ResourceClaim|ResourceClaimTemplate)\b""")


def _fact_documents(text: str, path: str) -> list[Resource]:
    """The resources of just those documents of a file that may be facts; the rest are the workers' to load.

    Files that hold a Namespace usually hold the workload too: loading only the
    documents the kind scan hits (split at `---` lines, which cannot occur inside
    a document), and those naming a ResourceClaim (its users), spares the parent most of the YAML. Positions do not matter here:
    facts are read, never reported on.
    """
    bounds = [0] + [match.start() for match in _DOCUMENT_START.finditer(text)] + [len(text)]
    out: list[Resource] = []
    for begin, end in zip(bounds, bounds[1:]):
        if end > begin and (_FACT_KIND.search(text, begin, end) or text.find(_CLAIM_USER, begin, end) >= 0):
            out += load_text(text[begin:end], path).resources
    return out


def _summary(resource: Resource) -> dict:
    """What reports read of an object that is not in this process: its identity."""
    meta = resource.metadata
    keep = {k: meta[k] for k in ("name", "generateName", "namespace", "uid") if k in meta}
    return {"apiVersion": resource.obj.get("apiVersion"), "kind": resource.obj.get("kind"), "metadata": keep}


def _work(bounds: tuple[int, int]) -> list[tuple]:
    gc.disable()  # what a file allocates dies with it, by reference counting; see sources.collector_paused
    engine, facts, files, prepare, (policies, skip) = shared()
    out = []
    for path, text in files[bounds[0]:bounds[1]]:
        loaded = load_text(text, path)
        evaluations = []
        for resource in loaded.resources:
            evaluation = engine.evaluate(resource, facts).narrow(policies, skip)
            positions = {f.pointer: f.position() for f in evaluation.findings}
            resource.origin.positions, resource.origin.node = positions, None  # `prepare` looks them up too
            evaluations.append((_summary(resource), resource.origin.document, positions, payload(evaluation),
                                prepare(evaluation) if prepare is not None else None))
        out.append((loaded.errors, loaded.skipped, evaluations))
    return out


def audit_files(engine: Engine, files: list[str], jobs: int, prepare: Optional[Callable[[Evaluation], Any]] = None,
                narrow: tuple = (None, None)) -> Optional[tuple[Loaded, list[Evaluation], Optional[list]]]:
    """(load errors and skips, evaluations, what `prepare` made of each) in the order one process would give;
    None when not worth forking. Evaluations are narrowed to `narrow` (--policy, --skip) before `prepare`."""
    if jobs <= 1 or "-" in files:
        return None
    read_errors, texts = [], []
    for path in files:
        text, error = read_text(path)
        if error is not None:
            read_errors.append((path, error))
        else:
            texts.append((path, text))
    if sum(len(text) for _, text in texts) < MIN_BYTES_PER_JOB * jobs or not can_fork():
        return None
    fact_resources = []
    for path, text in texts:
        if any(name in text for name in _FACT_NAMES):  # substrings first: 10x cheaper than the kind pattern
            fact_resources += _fact_documents(text, path)
    if any(r.kind in ("HorizontalPodAutoscaler", "ScaledObject") for r in fact_resources):
        return None  # its target may be in any file: only one process sees them all
    facts = OfflineFacts(fact_resources)

    results = iter(fork_map((engine, facts, texts, prepare, narrow), _work, len(texts), jobs))

    loaded, evaluations, prepared = Loaded(), [], []
    errors_by_path = dict(read_errors)
    for path in files:  # the order of a sequential run: file by file
        if path in errors_by_path:
            loaded.errors.append(errors_by_path[path])
            continue
        load_errors, skipped, evaluated = next(results)
        loaded.errors += load_errors
        loaded.skipped += skipped
        for summary, document, positions, data, made in evaluated:
            evaluations.append(rebuild(Resource(summary, Origin(file=path, document=document, positions=positions)),
                                       data))
            prepared.append(made)
    return loaded, evaluations, prepared if prepare is not None else None
