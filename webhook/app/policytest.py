"""`aiadmit test`: policy test cases, the same format for the bundle and for users' own policies.

A `PolicyTest` document names resources (files beside it) and says, for each
resource and policy, whether the policy passes, fails (optionally: which rules),
skips, or does not apply, and which patch its mutation must produce. The format
is documented in docs/policy-tests.md.

A test that cannot mean what it says is a format error, not a result: a policy
or rule id the loaded policies do not have, an `expect` that is not one of the
outcomes, a key the format does not know, a case whose resource matches nothing,
a file without a PolicyTest. Each is reported at its file:line:col and makes the
run exit 2, so a typo never reads as `ok` (a misspelt policy id has no findings,
which used to pass) nor as a failing policy.

Counts are of cases. The idempotency check (the mutated object mutates to
nothing) is reported apart, and only for resources that a mutating policy
applies to: a bundle without mutations has nothing to be idempotent about.
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
from webhook.model.resource import InputError, Resource
from webhook.inputs.sources import iter_manifest_files, load_paths
from webhook.outputs.diagnostics import PLACED as _PLACED

EXPECTATIONS = ("pass", "fail", "skip", "not-applicable")
TEST_KEYS = ("apiVersion", "kind", "metadata", "policies", "config", "resources", "context", "cases")
CASE_KEYS = ("resource", "policy", "expect", "rules", "action", "messageContains", "patch")
SELECTOR_KEYS = ("kind", "name", "namespace")


@dataclass
class CaseResult:
    """One case (or one idempotency check): what was expected, what happened, and where the case is written."""

    test_file: str
    name: str
    ok: bool
    detail: str = ""
    line: int = 0
    policy: str = ""
    resource: str = ""
    expect: str = ""
    got: str = ""

    def as_dict(self) -> dict:
        return {"file": self.test_file, "line": self.line, "name": self.name, "policy": self.policy,
                "resource": self.resource, "expect": self.expect, "got": self.got, "ok": self.ok,
                "detail": self.detail}


@dataclass
class TestRun:
    results: list[CaseResult] = field(default_factory=list)  # the cases
    idempotency: list[CaseResult] = field(default_factory=list)  # one per resource a mutating policy applies to
    errors: list[InputError] = field(default_factory=list)  # format errors: the test does not say what it means

    @property
    def passed(self) -> int:
        return sum(r.ok for r in self.results)

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.results)

    def extend(self, other: "TestRun") -> None:
        self.results += other.results
        self.idempotency += other.idempotency
        self.errors += other.errors


def find_test_files(paths: list[str]) -> list[str]:
    found = []
    loaded = load_paths([p for p in iter_manifest_files(paths)])
    seen = set()
    for resource in loaded.resources:
        if resource.kind == "PolicyTest" and resource.origin.file not in seen:
            seen.add(resource.origin.file)
            found.append(resource.origin.file)
    return found


def _matching(resources: list[Resource], ref: dict) -> list[Resource]:
    return [r for r in resources
            if all(str(getattr(r, key)) == str(ref[key]) for key in SELECTOR_KEYS if key in ref)]


def _describe(findings: list[Finding]) -> str:
    return "; ".join(f"{f.rule} [{f.action}/{f.result}] {f.message}" for f in findings) or "no findings"


def _closest(word: str, known) -> str:
    from difflib import get_close_matches

    close = get_close_matches(str(word), sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(sorted(known))})"


class _Doc:
    """A PolicyTest document and where each of its fields is written, for format errors at file:line:col."""

    def __init__(self, resource: Resource, path: str):
        self.resource, self.path, self.errors = resource, path, []

    def error(self, pointer: str, message: str) -> None:
        line, column = self.resource.origin.position(pointer)
        self.errors.append(InputError(self.path, line, message, column))

    def line(self, pointer: str) -> int:
        return self.resource.origin.position(pointer)[0]


def _check_document(doc: _Doc) -> None:
    """The document's own shape: known keys, lists where lists go, at least one case."""
    obj = doc.resource.obj
    for key in obj:
        if key not in TEST_KEYS:
            doc.error(f"/{key}", f"unknown key {key!r} in a PolicyTest{_closest(key, TEST_KEYS)}")
    for key in ("policies", "resources", "context"):
        if key in obj and not (isinstance(obj[key], list) and all(isinstance(v, str) for v in obj[key])):
            doc.error(f"/{key}", f"{key} must be a list of file names")
    if not obj.get("resources"):
        doc.error("/resources" if "resources" in obj else "", "a PolicyTest names its resources (resources: [FILE])")
    cases = obj.get("cases")
    if not isinstance(cases, list) or not cases:
        doc.error("/cases" if "cases" in obj else "", "a PolicyTest has a non-empty list of cases")


def _check_case(doc: _Doc, position: int, case, engine: Engine, resources: list[Resource]) -> bool:
    """Whether the case says something that can be checked; else its format errors are recorded."""
    at = f"/cases/{position}"
    before = len(doc.errors)
    if not isinstance(case, dict):
        doc.error(at, "a case is a mapping (resource, policy, expect, ...)")
        return False
    for key in case:
        if key not in CASE_KEYS:
            doc.error(f"{at}/{key}", f"unknown key {key!r} in a case{_closest(key, CASE_KEYS)}")
    ref = case.get("resource")
    if not isinstance(ref, dict) or not {"kind", "name"} <= set(ref) or set(ref) - set(SELECTOR_KEYS):
        doc.error(f"{at}/resource" if "resource" in case else at,
                  "resource selects one object by kind and name (and optionally namespace)")
    else:
        matching = _matching(resources, ref)
        if not matching:
            doc.error(f"{at}/resource", f"no resource of this test matches {json.dumps(ref)} "
                      f"(its resources: {', '.join(sorted({r.describe() for r in resources})) or 'none'})")
        elif len(matching) > 1:
            doc.error(f"{at}/resource", f"{len(matching)} resources match {json.dumps(ref)}: add namespace")
    policy_id = case.get("policy")
    policy = engine.by_id.get(policy_id) if isinstance(policy_id, str) else None
    intree = isinstance(policy_id, str) and (policy_id in engine.intree.policies  # a VAP, or a MAP
                                             or policy_id in engine.intree.mutating)
    if policy is None and not intree:
        doc.error(f"{at}/policy" if "policy" in case else at,
                  f"unknown policy id {policy_id!r}{_closest(policy_id, engine.by_id)}" if "policy" in case
                  else "a case names its policy")
    expect = case.get("expect", "pass")
    if expect not in EXPECTATIONS:
        doc.error(f"{at}/expect", f"expect must be one of {', '.join(EXPECTATIONS)}, not {expect!r}")
    if "rules" in case and expect in EXPECTATIONS:  # after a misspelt expect, one error is enough
        rules = case["rules"]
        if expect != "fail":
            doc.error(f"{at}/rules", "rules (the failing rules) go with expect: fail")
        elif not isinstance(rules, list) or not rules or not all(isinstance(r, str) for r in rules):
            doc.error(f"{at}/rules", "rules is a non-empty list of rule names")
        elif policy is not None:
            names = {r.name for r in policy.rules}
            for index, rule in enumerate(rules):
                if rule not in names:
                    doc.error(f"{at}/rules/{index}",
                              f"policy {policy.id} has no rule {rule!r}{_closest(rule, names)}")
    if "patch" in case and not isinstance(case["patch"], list):
        doc.error(f"{at}/patch", "patch is a list of JSON Patch operations")
    if "patch" in case and policy is not None and not policy.mutations and case["patch"]:
        doc.error(f"{at}/patch", f"policy {policy.id} has no mutations: it cannot produce a patch")
    return len(doc.errors) == before


def _load_errors(loaded) -> list[InputError]:
    return [InputError(e.file, e.line, e.message, e.column) for e in loaded.errors]


def run_test_file(path: str, engines: Optional[dict] = None) -> TestRun:
    """Run every case of one PolicyTest file (format errors, if any, instead of the bad cases)."""
    run = TestRun()
    loaded = load_paths([path], templates=False)
    docs = [r for r in loaded.resources if r.kind == "PolicyTest"]
    if loaded.errors or not docs:
        run.errors += _load_errors(loaded) or [InputError(path, 0, "no PolicyTest document in this file")]
        return run
    base = os.path.dirname(path)
    engines = engines if engines is not None else {}
    for doc_resource in docs:
        doc = _Doc(doc_resource, path)
        run.extend(_run_document(doc, base, engines))
        run.errors += doc.errors
    return run


def _run_document(doc: _Doc, base: str, engines: dict) -> TestRun:
    run = TestRun()
    obj = doc.resource.obj
    _check_document(doc)
    if doc.errors:
        return run
    name = (obj.get("metadata") or {}).get("name", os.path.basename(doc.path))
    policies = [os.path.join(base, p) for p in obj.get("policies", [])] or [BUILTIN_POLICY_DIR]
    config = os.path.join(base, obj["config"]) if obj.get("config") else None
    key = (tuple(policies), config)
    try:
        engine = engines.get(key) or Engine.load(policies, config)
    except Exception as exc:  # loading problems are format errors of the test, with their file:line
        problems = getattr(exc, "problems", None) or [str(exc)]
        for problem in problems:  # at the author's place in the policy when the problem has one, else the test's
            placed = _PLACED.match(problem)
            if placed and " " not in placed.group("file"):
                doc.errors.append(InputError(os.path.normpath(placed.group("file")), int(placed.group("line")),
                                             placed.group("message"), int(placed.group("column") or 0)))
            else:
                doc.error("/policies" if obj.get("policies") else "", f"{name}: cannot load policies/config: {problem}")
        return run
    engines[key] = engine
    inputs = load_paths([os.path.join(base, f) for f in obj.get("resources", [])])
    context_inputs = load_paths([os.path.join(base, f) for f in obj.get("context", [])])
    if inputs.errors or context_inputs.errors:
        run.errors += _load_errors(inputs) + _load_errors(context_inputs)
        return run
    resources = inputs.resources
    facts = OfflineFacts(resources + context_inputs.resources) if obj.get("context") is not None else None
    checked = [(position, case) for position, case in enumerate(obj["cases"])
               if _check_case(doc, position, case, engine, resources)]
    if doc.errors:
        return run
    evaluations: dict[int, object] = {}
    for position, case in checked:
        resource = _matching(resources, case["resource"])[0]
        if id(resource) not in evaluations:
            evaluations[id(resource)] = engine.evaluate(resource, facts)
        label = f"{name}[{position}] {case['policy']} {case.get('expect', 'pass')} {resource.kind}/{resource.name}"
        result = _run_case(engine, resource, evaluations[id(resource)], facts, case)
        result.test_file, result.name, result.line = doc.path, label, doc.line(f"/cases/{position}")
        run.results.append(result)
    mutating = {p.id for p in engine.policies if p.mutations}
    for resource in resources:
        evaluation = evaluations.get(id(resource)) or engine.evaluate(resource, facts)
        applied = set(evaluation.policies)
        if applied & mutating:
            result = _idempotent(engine, resource, facts)
            result.test_file, result.name = doc.path, f"{name} idempotent {resource.kind}/{resource.name}"
            result.line, result.policy = doc.line(""), ", ".join(sorted(applied & mutating))
            run.idempotency.append(result)
    return run


def outcome(evaluation, policy_id: str) -> tuple[str, list[Finding]]:
    """What one policy did to one resource: not-applicable, pass, skip, fail or error, and its findings."""
    findings = [f for f in evaluation.findings if f.policy == policy_id]
    if evaluation.errors:
        return "error", findings
    if policy_id not in evaluation.policies:
        return "not-applicable", findings
    if any(f.result == "error" for f in findings):
        return "error", findings
    if any(f.result == "fail" for f in findings):
        return "fail", findings
    if findings:
        return "skip", findings
    return "pass", findings


def _run_case(engine: Engine, resource: Resource, evaluation, facts, case: dict) -> CaseResult:
    expect = case.get("expect", "pass")
    got, findings = outcome(evaluation, case["policy"])
    result = CaseResult("", "", True, policy=case["policy"], resource=resource.describe(), expect=expect, got=got)
    problems = []
    if got == "error" and evaluation.errors:
        problems.append("input errors: " + "; ".join(e.message for e in evaluation.errors))
    elif got != expect:
        problems.append(f"expected {expect}, got {got}: {_describe(findings)}")
    failing = [f for f in findings if f.result in ("fail", "error")]
    if "rules" in case and got == "fail" and sorted({f.rule for f in failing}) != sorted(case["rules"]):
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
    result.ok, result.detail = not problems, "; ".join(problems)
    return result


def _idempotent(engine: Engine, resource: Resource, facts) -> CaseResult:
    result = CaseResult("", "", True, resource=resource.describe(), expect="idempotent")
    first = engine.mutate(resource, facts)
    if first.errors:
        result.ok, result.got, result.detail = False, "error", "mutation errors: " + "; ".join(first.errors)
        return result
    second = engine.mutate(Resource(first.patched, resource.origin), facts)
    if second.operations:
        result.ok, result.got = False, "patches again"
        result.detail = f"mutating the mutated object patches again: {second.operations}"
        return result
    result.got = "idempotent"
    return result


def run_tests(paths: list[str]) -> TestRun:
    total = TestRun()
    files = find_test_files(paths)
    for path in paths:
        if not any(f == path or f.startswith(path.rstrip(os.sep) + os.sep) for f in files):
            total.errors.append(InputError(path, 0, "no PolicyTest document here (kind: PolicyTest)"))
    engines: dict = {}
    for path in files:
        total.extend(run_test_file(path, engines))
    return total
