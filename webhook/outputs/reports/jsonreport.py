"""`--format json`: the stable machine format (see docs/cli.md)."""

from __future__ import annotations

import json
from collections import Counter

from webhook.outputs.reports import fragments_of

_ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # what json.dumps(item, ensure_ascii=False) gives


def outcome(failing: set, applied) -> str:
    """What happened to one resource, from the actions of its findings that failed or could not be evaluated and
    the policies that applied: denied, warned, audited (only audit-level findings), passed (policies applied, none
    failed), or unchecked (no policy applied: excluded, or a kind no policy matches)."""
    for action, word in (("deny", "denied"), ("warn", "warned"), ("audit", "audited")):
        if action in failing:
            return word
    return "passed" if applied else "unchecked"


def outcome_of(evaluation) -> str:
    return outcome({f.action for f in evaluation.findings if f.result in ("fail", "error")}, evaluation.policies)


def passed_policies(evaluation) -> list[str]:
    """The policies that applied and found nothing (no failure, error or skip)."""
    touched = {f.policy for f in evaluation.findings}
    return [p for p in evaluation.policies if p not in touched]


def summary(result) -> dict:
    """Counts of resources (by outcome) and of findings (by action) kept apart: `deny` counts findings."""
    findings = result.findings
    by_policy = Counter(f.policy for f in findings if f.result != "skip")
    outcomes = Counter(outcome_of(e) for e in result.evaluations)
    return {
        "resources": len(result.evaluations),
        "resourcesBy": {word: outcomes.get(word, 0) for word in ("denied", "warned", "audited", "passed",
                                                                   "unchecked")},
        "ruleErrors": sum(1 for f in findings if f.result == "error"),
        "findings": len(findings),
        "deny": sum(1 for f in findings if f.action == "deny" and f.result != "skip"),
        "warn": sum(1 for f in findings if f.action == "warn" and f.result != "skip"),
        "audit": sum(1 for f in findings if f.action == "audit" and f.result != "skip"),
        "skipped": sum(1 for f in findings if f.result == "skip"),
        "errors": len(result.errors),
        "byPolicy": dict(sorted(by_policy.items())),
    }


def fragment(evaluation, engine, **options) -> list[str]:
    """Each finding of the evaluation, encoded."""
    return [_ENCODE(finding.as_dict()) for finding in evaluation.findings]


def render(result, engine, fragments=None, **options) -> str:
    parts = fragments_of(fragment, result, engine, fragments, options)
    document = {
        "findings": Encoded(text for part in parts for text in part),
        "errors": [{"file": e.file, "line": e.line, "message": e.message} for e in result.errors],
        "resources": [_resource(e) for e in result.evaluations if e.policies or e.findings],
        "summary": summary(result),
    }
    if result.skipped:
        document["skippedFiles"] = [{"file": s.file, "line": s.line, "message": s.message} for s in result.skipped]
    if result.notes:
        document["notes"] = list(result.notes)
    return dump(document)


def _resource(evaluation) -> dict:
    """One resource's `applied` and `passed` policies: "passed" and "did not apply" differ here too."""
    resource = evaluation.resource
    return {"resource": resource.ref(), "file": resource.origin.file, "outcome": outcome_of(evaluation),
            "applied": list(evaluation.policies), "passed": passed_policies(evaluation)}


class Encoded(list):
    """Items already encoded as JSON text (by a caller that had to measure them): written as they are."""


def dump(document: dict) -> str:
    """Pretty enough to read and diff (one finding per line), fast enough for 20,000 findings.

    json.dumps(indent=...) runs the pure-Python encoder; each item dumped compactly uses the C one.
    """
    parts = []
    for key, value in document.items():
        if isinstance(value, Encoded):
            items = ",\n    ".join(value)
            parts.append(f"  {json.dumps(key)}: [\n    {items}\n  ]" if value else f"  {json.dumps(key)}: []")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            items = ",\n    ".join(_ENCODE(item) for item in value)
            parts.append(f"  {json.dumps(key)}: [\n    {items}\n  ]")
        else:
            parts.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
