"""`--format sarif`: SARIF 2.1.0 for code-scanning UIs (GitHub, GitLab, VS Code's SARIF viewer).

Each policy of the bundle is a rule (id, summary, why, remediation as help,
docs link, default level from its action); each finding a result with a
physical location (file, line, column) when the input was a file, and a
logical location (the Kubernetes object and field) always, so piped and
cluster input still say what to fix. Input that could not be read becomes a
tool execution notification: it must not vanish from the log.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from urllib.parse import quote

from webhook import __version__
from webhook.outputs.reports import fragments_of
from webhook.outputs.reports.location import locate

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {"deny": "error", "warn": "warning", "audit": "note"}
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(..., separators=(",", ":"))


@lru_cache(maxsize=4096)  # one file holds many findings
def artifact_uri(path: str) -> str:
    """A relative path stays relative (code-scanning resolves it against the checkout); absolute becomes file://."""
    posix = path.replace(os.sep, "/")
    if os.path.isabs(path):
        return "file://" + quote(posix)
    return quote(posix[2:] if posix.startswith("./") else posix)


def _rule(policy, action: str) -> dict:
    help_text = f"{' '.join(policy.remediation.split())}\n\nWhy: {' '.join(policy.why.split())}"
    rule = {
        "id": policy.id,
        "name": "".join(part.capitalize() for part in policy.id.split("-")),
        "shortDescription": {"text": policy.summary},
        "fullDescription": {"text": " ".join(policy.why.split())},
        "help": {"text": help_text,
                 "markdown": f"**Remediation.** {policy.remediation.strip()}\n\n**Why.** {policy.why.strip()}\n\n"
                             f"Docs: `{policy.docs}`"},
        "defaultConfiguration": {"level": LEVELS[action]},
        "properties": {"action": action, "docs": policy.docs, "tags": ["kubernetes", "ai-workloads"]},
    }
    if policy.docs.startswith(("https://", "http://")):
        rule["helpUri"] = policy.docs
    return rule


def _result(finding, rule_index: int) -> str:
    """One SARIF result, encoded compactly (by the process that evaluated the object)."""
    location = locate(finding)
    resource = finding.resource
    qualified = "/".join(p for p in (location.cluster, resource.namespace, resource.kind, resource.name) if p) \
        + (f"#{finding.pointer}" if finding.pointer else "")
    result: dict = {"ruleId": finding.policy, "ruleIndex": rule_index}
    if finding.result == "skip":
        result.update(kind="notApplicable", level="none")
    else:
        result.update(kind="fail", level=LEVELS[finding.action])
    result["message"] = {"text": finding.message}
    place: dict = {"logicalLocations": [{"name": resource.name or resource.kind, "fullyQualifiedName": qualified,
                                         "kind": "object"}]}
    if location.file and not location.from_stdin and location.cluster is None:
        physical: dict = {"artifactLocation": {"uri": artifact_uri(location.file)}}
        if location.line:
            physical["region"] = {"startLine": location.line, "startColumn": max(location.column, 1)}
        place["physicalLocation"] = physical
    result["locations"] = [place]
    fingerprint = "|".join((finding.policy, finding.rule, resource.kind, resource.namespace, resource.name,
                            finding.pointer))
    result["partialFingerprints"] = {"aiadmitFinding/v1": fingerprint}
    result["properties"] = {"rule": finding.rule, "action": finding.action, "result": finding.result,
                            "path": finding.pointer,
                            "resource": {"apiVersion": resource.api_version, "kind": resource.kind,
                                         "namespace": resource.namespace, "name": resource.name}}
    return _COMPACT(result)


def _notification(error, level: str) -> dict:
    notification: dict = {"level": level, "message": {"text": error.message}}
    if error.file and error.file not in ("<stdin>", "-"):
        physical: dict = {"artifactLocation": {"uri": artifact_uri(error.file)}}
        if error.line:
            physical["region"] = {"startLine": error.line, "startColumn": max(error.column, 1)}
        notification["locations"] = [{"physicalLocation": physical}]
    return notification


def _policies(engine) -> list:
    return sorted(engine.by_id.values(), key=lambda p: p.id)


@lru_cache(maxsize=8)  # asked for by every evaluation's fragment, of one engine
def _rule_index(engine) -> dict[str, int]:
    """Every rule's index: aiadmit's policies, then the ValidatingAdmissionPolicies given (engine.intree)."""
    ids = [p.id for p in _policies(engine)] + sorted(getattr(engine, "intree", None) and engine.intree.policies or ())
    return {name: i for i, name in enumerate(ids)}


def _intree_rule(name: str) -> dict:
    return {"id": name, "name": name, "shortDescription": {"text": f"ValidatingAdmissionPolicy {name}"},
            "defaultConfiguration": {"level": "error"},
            "properties": {"kind": "ValidatingAdmissionPolicy", "tags": ["kubernetes"]}}


def fragment(evaluation, engine, **options) -> list[str]:
    """Each finding of the evaluation as a SARIF result, encoded compactly."""
    index = _rule_index(engine)
    return [_result(f, index[f.policy]) for f in evaluation.findings]


def render(result, engine, fragments=None, **options) -> str:
    """Compact: SARIF is read by tools; each result was written (`_result`) by the process that evaluated it."""
    parts = fragments_of(fragment, result, engine, fragments, options)
    rules = [_rule(p, engine.config.settings(p.id).action or p.action) for p in _policies(engine)]
    rules += [_intree_rule(name) for name in sorted(getattr(engine, "intree", None) and engine.intree.policies or ())]
    notifications = [_notification(e, "error") for e in result.errors]
    notifications += [_notification(s, "note") for s in result.skipped]
    invocation = {"executionSuccessful": not result.errors}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    tool = {"driver": {"name": "aiadmit", "version": __version__, "semanticVersion": __version__, "rules": rules}}
    results = ",".join(text for part in parts for text in part)
    return (f'{{"$schema":{_COMPACT(SCHEMA_URI)},"version":"2.1.0","runs":[{{"tool":{_COMPACT(tool)},'
            f'"invocations":[{_COMPACT(invocation)}],"results":[{results}],"columnKind":"unicodeCodePoints"}}]}}\n')
