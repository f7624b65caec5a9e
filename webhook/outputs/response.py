"""AdmissionResponses: allow, deny and patch answers, with texts fitted to what the API server keeps.

What the API server gets, and why:
- deny: `allowed: false`, `status.code` 403, a message with one line per
  distinct failed deny-level finding (`<id>: <message>`), up to 8,192
  characters, then a line counting the rest: kubectl prints it after "denied
  the request:".
- warn-level findings become `warnings`, one line each, no control characters,
  at most 256 runes each and 4096 in total: the API server drops a warning it
  cannot put in a header and truncates beyond those sizes, so we cut first and
  say how many were left out.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from webhook.engine.deadline import check_deadline
from webhook.inputs.review import API_VERSION, describe
from webhook.model.findings import Finding
from webhook.model.resource import Resource

WARNING_RUNES = 256       # k8s.io/apiserver truncates each warning beyond this once the total is exceeded
WARNINGS_TOTAL_RUNES = 4096  # ... and the total of all warnings of one request
DENY_LINE_RUNES = 400     # one finding's line in a deny message
DENY_MESSAGE_RUNES = 8192  # a whole deny message: every line up to here, then a count (kubectl, events, audit logs)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_REASONS = {400: "BadRequest", 403: "Forbidden", 413: "RequestEntityTooLarge", 500: "InternalError", 504: "Timeout"}


@dataclass
class Outcome:
    """The answer plus what the server logs and counts (never the object's contents)."""

    response: dict
    outcome: str  # allowed | warned | denied | patched | skipped | error
    uid: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    operation: str = ""
    dry_run: bool = False
    findings: list[Finding] = field(default_factory=list)
    patched_policies: list[str] = field(default_factory=list)
    denied_policies: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # internal errors, for the log
    exemptions: list[str] = field(default_factory=list)  # "policy: by what" (enforcement.exempt), for the log

    @property
    def body(self) -> dict:
        return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": self.response}


def _outcome(request: dict, response: dict, outcome: str, **extra) -> Outcome:
    return Outcome(response=response, outcome=outcome, **describe(request), **extra)


def allow(request: dict, outcome: str = "allowed", warnings: Optional[list[str]] = None, **extra) -> Outcome:
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    if warnings:
        response["warnings"] = warnings
    return _outcome(request, response, outcome, **extra)


def deny(request: dict, message: str, code: int = 403, warnings: Optional[list[str]] = None,
         outcome: str = "denied", **extra) -> Outcome:
    response: dict[str, Any] = {"uid": request["uid"], "allowed": False,
                                "status": {"code": code, "message": message,
                                           "reason": _REASONS.get(code, "InternalError")}}
    if warnings:
        response["warnings"] = warnings
    return _outcome(request, response, outcome, **extra)


def one_line(text: str) -> str:
    # An ASCII text without control characters (most messages) is only stripped: for ASCII, isprintable() is
    # exactly "no character of _CONTROL", and both tests run in C, where the regex substitution costs a call.
    if type(text) is str and text.isascii() and text.isprintable():
        return text.strip()
    return _CONTROL.sub(" ", str(text)).strip()


def _cut(text: str, runes: int) -> str:
    return text if len(text) <= runes else text[:runes - 1] + "…"


def deny_message(resource: Resource, blocking: list[Finding], deadline: Optional[float] = None) -> str:
    """The first line names the object; then one line per distinct failed finding, grouped by policy, each cut at
    DENY_LINE_RUNES; past DENY_MESSAGE_RUNES in all, a last line counts what is not shown."""
    # dicts as ordered sets of the raw messages, made one line only where shown: an object with 30,000 containers
    # has 360,000 findings, and a list's `in` made this quadratic (6 s of an 8 s budget, measured)
    by_policy: dict[str, dict[str, None]] = {}
    for count, finding in enumerate(blocking):
        if not count % 4096:
            check_deadline(deadline)
        by_policy.setdefault(finding.policy, {})[finding.message] = None
    lines = [f"aiadmit denied {resource.describe()}: {len(by_policy)} polic{'y' if len(by_policy) == 1 else 'ies'} "
             f"failed"]
    budget = DENY_MESSAGE_RUNES - len(lines[0]) - 100  # room for the line that counts the rest
    shown = 0
    total = sum(len(unique) for unique in by_policy.values())
    for policy, unique in by_policy.items():
        for message in unique:
            entry = _cut(f"{policy}: {one_line(message)}", DENY_LINE_RUNES)
            if budget - len(entry) - 1 < 0:
                rest = [p for p, u in by_policy.items() for _ in u][shown:]
                policies = ", ".join(dict.fromkeys(rest))
                lines.append(_cut(f"… {total - shown} more finding(s) not shown ({policies}); `aiadmit audit` lists "
                                  f"all", DENY_LINE_RUNES))
                return "\n".join(lines)
            lines.append(entry)
            budget -= len(entry) + 1
            shown += 1
    return "\n".join(lines)


def fit_warnings(texts: list[str]) -> list[str]:
    """One line each, deduplicated, within the API server's per-warning and total sizes.

    Texts past what could be shown are only counted (distinct raw texts), never made one line: an object with
    30,000 containers brings 60,000 warnings, and cleaning each cost 0.2 s past the time budget (measured).
    """
    unique: dict[str, None] = {}  # an ordered set: `in` on a list made this quadratic in the number of warnings
    beyond: dict[str, None] = {}
    total = 0
    for text in texts:
        if total > WARNINGS_TOTAL_RUNES:
            beyond[text] = None
            continue
        line = _cut(one_line(text), WARNING_RUNES)
        if line and line not in unique:
            unique[line] = None
            total += len(line)
    items = list(unique)
    if total <= WARNINGS_TOTAL_RUNES and not beyond:
        return items
    budget = WARNINGS_TOTAL_RUNES - 64  # room for the line that counts the rest
    out: list[str] = []
    for line in items:
        if budget - len(line) < 0:
            break
        out.append(line)
        budget -= len(line)
    out.append(f"aiadmit: {len(items) - len(out) + len(beyond)} more warning(s) not shown")
    return out


def warning(finding: Finding, why: str = "") -> str:
    return f"{finding.policy}: {why}{finding.message}"


def patched(request: dict, operations: list[dict], warnings: list[str], policies: list[str],
            problems: list[str]) -> Outcome:
    """Allowed, with `operations` as the response's JSON Patch."""
    outcome = allow(request, "patched", fit_warnings(warnings), problems=problems)
    outcome.response["patchType"] = "JSONPatch"
    outcome.response["patch"] = base64.b64encode(
        json.dumps(operations, separators=(",", ":"), sort_keys=True).encode()).decode("ascii")
    outcome.patched_policies = sorted(policies)
    return outcome


def error_outcome(request: dict, endpoint: str, reason: str) -> Outcome:
    """An internal failure: validate fails closed (deny, code 500 inside the review); mutate admits unpatched."""
    if endpoint == "mutate":
        return allow(request, "error", fit_warnings([f"aiadmit: not mutated: {reason}"]), problems=[reason])
    return deny(request, f"aiadmit could not check this object: {reason}", code=500, outcome="error",
                problems=[reason])
