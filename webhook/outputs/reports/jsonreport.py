"""`--format json`: the stable machine format (see docs/cli.md)."""

from __future__ import annotations

import json
from collections import Counter

from webhook.outputs.reports import fragments_of

_ENCODE = json.JSONEncoder(ensure_ascii=False).encode  # what json.dumps(item, ensure_ascii=False) gives


def summary(result) -> dict:
    findings = result.findings
    by_policy = Counter(f.policy for f in findings if f.result != "skip")
    return {
        "resources": len(result.evaluations),
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
        "summary": summary(result),
    }
    if result.skipped:
        document["skippedFiles"] = [{"file": s.file, "line": s.line, "message": s.message} for s in result.skipped]
    if result.notes:
        document["notes"] = list(result.notes)
    return dump(document)


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
