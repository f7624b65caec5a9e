"""`aiadmit test`: policy test cases, the same format for the bundle and for users' own policies.

A `PolicyTest` document names resources (files beside it) and says, for each
resource and policy, whether the policy passes, fails (optionally: which rules)
or skips, and which patch its mutation must produce. Every resource of a test is
also checked for idempotent mutation: the mutated object mutates to nothing.
The format is documented in docs/policy-tests.md.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Optional

from webhook.engine.core import Engine
from webhook.model.facts import OfflineFacts
from webhook.model.findings import Finding
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.model.resource import Resource
from webhook.inputs.sources import iter_manifest_files, load_paths

EXPECTATIONS = ("pass", "fail", "skip")


@dataclass
class CaseResult:
    test_file: str
    name: str
    ok: bool
    detail: str = ""


@dataclass
class TestRun:
    results: list[CaseResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(r.ok for r in self.results)

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.results) + len(self.errors)


def find_test_files(paths: list[str]) -> list[str]:
    found = []
    loaded = load_paths([p for p in iter_manifest_files(paths)])
    seen = set()
    for resource in loaded.resources:
        if resource.kind == "PolicyTest" and resource.origin.file not in seen:
            seen.add(resource.origin.file)
            found.append(resource.origin.file)
    return found


def _select(resources: list[Resource], ref: dict) -> Optional[Resource]:
    for resource in resources:
        if all(str(getattr(resource, key)) == str(ref[key]) for key in ("kind", "name", "namespace") if key in ref):
            return resource
    return None


def _describe(findings: list[Finding]) -> str:
    return "; ".join(f"{f.rule} [{f.action}/{f.result}] {f.message}" for f in findings) or "no findings"


def run_test_file(path: str, engines: Optional[dict] = None) -> TestRun:
    """Run every case of one PolicyTest file."""
    run = TestRun()
    loaded = load_paths([path])
    docs = [r for r in loaded.resources if r.kind == "PolicyTest"]
    if loaded.errors or not docs:
        run.errors += [f"{e.file}:{e.line}: {e.message}" for e in loaded.errors] or [f"{path}: no PolicyTest"]
        return run
    base = os.path.dirname(path)
    engines = engines if engines is not None else {}
    for doc_resource in docs:
        doc = doc_resource.obj
        name = (doc.get("metadata") or {}).get("name", os.path.basename(path))
        policies = [os.path.join(base, p) for p in doc.get("policies", [])] or [BUILTIN_POLICY_DIR]
        config = os.path.join(base, doc["config"]) if doc.get("config") else None
        key = (tuple(policies), config)
        try:
            engine = engines.get(key) or Engine.load(policies, config)
        except Exception as exc:  # loading problems are the test's result, with their file:line
            run.errors.append(f"{path}: {name}: cannot load policies/config: {exc}")
            continue
        engines[key] = engine
        inputs = load_paths([os.path.join(base, f) for f in doc.get("resources", [])])
        context_inputs = load_paths([os.path.join(base, f) for f in doc.get("context", [])])
        if inputs.errors or context_inputs.errors:
            run.errors += [f"{e.file}:{e.line}: {e.message}" for e in inputs.errors + context_inputs.errors]
            continue
        resources = inputs.resources
        facts = OfflineFacts(resources + context_inputs.resources) if doc.get("context") is not None else None
        for position, case in enumerate(doc.get("cases") or []):
            label = f"{name}[{position}] {case.get('policy')} {case.get('expect')} " \
                    f"{case['resource'].get('kind')}/{case['resource'].get('name')}"
            run.results.append(_run_case(path, label, engine, resources, facts, case))
        for resource in resources:
            run.results.append(_idempotent(path, f"{name} idempotent {resource.kind}/{resource.name}",
                                           engine, resource, facts))
    return run


def _run_case(path: str, label: str, engine: Engine, resources: list[Resource], facts, case: dict) -> CaseResult:
    resource = _select(resources, case["resource"])
    if resource is None:
        return CaseResult(path, label, False, f"no resource matches {case['resource']}")
    expect = case.get("expect", "pass")
    if expect not in EXPECTATIONS:
        return CaseResult(path, label, False, f"expect must be one of {EXPECTATIONS}")
    evaluation = engine.evaluate(resource, facts)
    if evaluation.errors:
        return CaseResult(path, label, False, "input errors: " + "; ".join(e.message for e in evaluation.errors))
    findings = [f for f in evaluation.findings if f.policy == case["policy"]]
    failing = [f for f in findings if f.result in ("fail", "error")]
    skipped = [f for f in findings if f.result == "skip"]
    problems = []
    if expect == "pass" and findings:
        problems.append(f"expected pass, got: {_describe(findings)}")
    if expect == "fail" and not failing:
        problems.append(f"expected fail, got: {_describe(findings)}")
    if expect == "skip" and (not skipped or failing):
        problems.append(f"expected skip, got: {_describe(findings)}")
    if "rules" in case and expect == "fail" and sorted({f.rule for f in failing}) != sorted(case["rules"]):
        problems.append(f"expected failing rules {sorted(case['rules'])}, got {sorted({f.rule for f in failing})}: "
                        f"{_describe(failing)}")
    if "action" in case and any(f.action != case["action"] for f in failing or findings):
        problems.append(f"expected action {case['action']}, got {sorted({f.action for f in findings})}")
    if "messageContains" in case and not any(case["messageContains"] in f.message for f in findings):
        problems.append(f"no message contains {case['messageContains']!r}: {_describe(findings)}")
    if "patch" in case:
        mutation = engine.mutate(resource, facts)
        ours = mutation.by_policy.get(case["policy"], [])
        if mutation.errors:
            problems.append("mutation errors: " + "; ".join(mutation.errors))
        if case["patch"] != ours:
            problems.append(f"expected patch {json.dumps(case['patch'])}, got {json.dumps(ours)}")
    return CaseResult(path, label, not problems, "; ".join(problems))


def _idempotent(path: str, label: str, engine: Engine, resource: Resource, facts) -> CaseResult:
    first = engine.mutate(resource, facts)
    if first.errors:
        return CaseResult(path, label, False, "mutation errors: " + "; ".join(first.errors))
    second = engine.mutate(Resource(first.patched, resource.origin), facts)
    if second.operations:
        return CaseResult(path, label, False, f"mutating the mutated object patches again: {second.operations}")
    return CaseResult(path, label, True)


def run_tests(paths: list[str]) -> TestRun:
    total = TestRun()
    files = find_test_files(paths)
    if not files:
        total.errors.append(f"no PolicyTest documents under {', '.join(paths)}")
    engines: dict = {}
    for path in files:
        run = run_test_file(path, engines)
        total.results += run.results
        total.errors += run.errors
    return total
