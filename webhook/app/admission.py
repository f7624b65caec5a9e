"""AdmissionReview (admission.k8s.io/v1) -> Resource(s) -> engine -> AdmissionResponse.

Pure functions: no Flask, no sockets, no clocks. The server (webhook/app/server.py)
adds transport, the time budget, metrics and logs around them.

What the API server gets, and why:
- deny: `allowed: false`, `status.code` 403, a message with one line per failed
  deny-level policy (`<id>: <message>`, extra findings of the same policy
  counted, not repeated): kubectl prints it after "denied the request:".
- warn-level findings become `warnings`, one line each, no control characters,
  at most 256 runes each and 4096 in total: the API server drops a warning it
  cannot put in a header and truncates beyond those sizes, so we cut first and
  say how many were left out.
- on UPDATE a violation the old object already had is demoted to a warning:
  relabelling or scaling an old workload must never break it.
- a requester listed in `trustedControllers` creating an object with a
  controller ownerReference gets deny lowered to warn: its owner went through
  this webhook. userInfo is set by the API server; an ownerReference is not
  proof of anything (a user can write one), so it counts only with the requester.
- `/mutate` answers a JSON Patch only when there is something to change, and
  only after applying it to a copy of the object (`check_patch`): the API
  server rejects a patch that does not apply whatever the failure policy says.
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from webhook.engine.core import Engine
from webhook.model.facts import ClusterFacts
from webhook.model.findings import Finding
from webhook.model.resource import Origin, Resource
from webhook.k8s.workload import ShapeError, build_workload

API_VERSION = "admission.k8s.io/v1"
SKIPPED_OPERATIONS = ("DELETE", "CONNECT")
CHECKED_OPERATIONS = ("CREATE", "UPDATE")
WARNING_RUNES = 256       # k8s.io/apiserver truncates each warning beyond this once the total is exceeded
WARNINGS_TOTAL_RUNES = 4096  # ... and the total of all warnings of one request
DENY_LINE_RUNES = 400     # one finding's line in a deny message
DENY_MESSAGE_RUNES = 8192  # a whole deny message: every line up to here, then a count (kubectl, events, audit logs)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_REASONS = {400: "BadRequest", 403: "Forbidden", 500: "InternalError", 504: "Timeout"}


class ReviewError(Exception):
    """A request that is not an AdmissionReview we can answer: HTTP 400 with this reason."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason = reason
        self.status = status


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

    @property
    def body(self) -> dict:
        return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": self.response}


# ---------------------------------------------------------------------- parsing
def parse(body: bytes) -> dict:
    """The review's `request`, checked for what we need; ReviewError otherwise."""
    try:
        review = json.loads(body)
    except RecursionError:
        raise ReviewError("request body nests too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReviewError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(review, dict):
        raise ReviewError(f"expected an AdmissionReview object, got a JSON {type(review).__name__}")
    if review.get("kind") != "AdmissionReview":
        raise ReviewError("expected kind AdmissionReview")
    if review.get("apiVersion") != API_VERSION:
        raise ReviewError(f"unsupported apiVersion {review.get('apiVersion')!r}: only {API_VERSION} is served "
                          f"(set admissionReviewVersions: [v1] in the webhook configuration)")
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing or not a string")
    return request


def describe(request: dict) -> dict:
    """Log fields of a request: coordinates only."""
    kind = request.get("kind") if isinstance(request.get("kind"), dict) else {}
    return {"uid": str(request.get("uid", "")), "kind": str(kind.get("kind", "")),
            "namespace": str(request.get("namespace") or ""), "name": str(request.get("name") or ""),
            "operation": str(request.get("operation") or ""), "dry_run": bool(request.get("dryRun"))}


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


def _resource(request: dict, key: str) -> Optional[Resource]:
    obj = request.get(key)
    if not isinstance(obj, dict):
        return None
    obj = dict(obj)  # never change the caller's dict; shallow is enough for the fields filled in below
    kind = request.get("kind") if isinstance(request.get("kind"), dict) else {}
    if not obj.get("kind") and kind.get("kind"):
        obj["kind"] = kind["kind"]
        group, version = kind.get("group", ""), kind.get("version", "")
        obj.setdefault("apiVersion", f"{group}/{version}" if group else version)
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and not metadata.get("namespace") and request.get("namespace"):
        obj["metadata"] = {**metadata, "namespace": request["namespace"]}
    return Resource(obj, Origin(uid=request["uid"], operation=request.get("operation")))


def _precheck(request: dict) -> Optional[Outcome]:
    """The answer for requests that need no policy: DELETE, CONNECT, subresources, and broken ones."""
    operation = request.get("operation")
    if operation in SKIPPED_OPERATIONS or request.get("subResource"):
        return allow(request, "skipped")
    if operation not in CHECKED_OPERATIONS:
        return deny(request, f"aiadmit: unsupported operation {operation!r}", code=400, outcome="invalid")
    if not isinstance(request.get("object"), dict):
        return deny(request, "aiadmit: request.object must be a Kubernetes object", code=400, outcome="invalid")
    if operation == "UPDATE" and request.get("oldObject") is not None and not isinstance(request["oldObject"], dict):
        return deny(request, "aiadmit: request.oldObject must be a Kubernetes object", code=400, outcome="invalid")
    return None


# ---------------------------------------------------------------------- trust
def trusted_requester(request: dict, patterns: tuple[str, ...]) -> bool:
    """A configured controller identity creating an object it controls (see module docstring)."""
    user = request.get("userInfo") if isinstance(request.get("userInfo"), dict) else {}
    username = user.get("username")
    if not isinstance(username, str) or not any(fnmatch.fnmatchcase(username, p) for p in patterns):
        return False
    metadata = request["object"].get("metadata")
    owners = metadata.get("ownerReferences") if isinstance(metadata, dict) else None
    return isinstance(owners, list) and any(isinstance(o, dict) and o.get("controller") is True for o in owners)


# ---------------------------------------------------------------------- texts
def _one_line(text: str) -> str:
    return _CONTROL.sub(" ", str(text)).strip()


def _cut(text: str, runes: int) -> str:
    return text if len(text) <= runes else text[:runes - 1] + "…"


def deny_message(resource: Resource, blocking: list[Finding]) -> str:
    """The first line names the object; then one line per distinct failed finding, grouped by policy, each cut at
    DENY_LINE_RUNES; past DENY_MESSAGE_RUNES in all, a last line counts what is not shown."""
    by_policy: dict[str, list[str]] = {}
    for finding in blocking:
        messages = by_policy.setdefault(finding.policy, [])
        message = _one_line(finding.message)
        if message not in messages:
            messages.append(message)
    lines = [f"aiadmit denied {resource.describe()}: {len(by_policy)} polic{'y' if len(by_policy) == 1 else 'ies'} "
             f"failed"]
    entries = [_cut(f"{policy}: {message}", DENY_LINE_RUNES) for policy, messages in by_policy.items()
               for message in messages]
    budget = DENY_MESSAGE_RUNES - len(lines[0]) - 100  # room for the line that counts the rest
    for number, entry in enumerate(entries):
        if budget - len(entry) - 1 < 0:
            rest = entries[number:]
            policies = ", ".join(dict.fromkeys(entry.split(":", 1)[0] for entry in rest))
            lines.append(_cut(f"… {len(rest)} more finding(s) not shown ({policies}); `aiadmit audit` lists all",
                              DENY_LINE_RUNES))
            break
        lines.append(entry)
        budget -= len(entry) + 1
    return "\n".join(lines)


def fit_warnings(texts: list[str]) -> list[str]:
    """One line each, deduplicated, within the API server's per-warning and total sizes."""
    items: list[str] = []
    for text in texts:
        line = _cut(_one_line(text), WARNING_RUNES)
        if line and line not in items:
            items.append(line)
    if sum(map(len, items)) <= WARNINGS_TOTAL_RUNES:
        return items
    budget = WARNINGS_TOTAL_RUNES - 64  # room for the line that counts the rest
    out: list[str] = []
    for line in items:
        if budget - len(line) < 0:
            break
        out.append(line)
        budget -= len(line)
    out.append(f"aiadmit: {len(items) - len(out)} more warning(s) not shown")
    return out


def _warning(finding: Finding, why: str = "") -> str:
    return f"{finding.policy}: {why}{finding.message}"


# ---------------------------------------------------------------------- validate
def validate(engine: Engine, request: dict, facts: Optional[ClusterFacts] = None,
             deadline: Optional[float] = None) -> Outcome:
    early = _precheck(request)
    if early is not None:
        return early
    resource = _resource(request, "object")
    evaluation = engine.evaluate(resource, facts, deadline)
    if evaluation.errors:
        detail = "; ".join(_one_line(e.message) for e in evaluation.errors[:5])
        return deny(request, f"aiadmit cannot check {resource.describe()}: {detail}", code=400,
                    outcome="invalid", findings=evaluation.findings)
    findings = evaluation.findings
    pre_existing: set = set()
    if request.get("operation") == "UPDATE" and isinstance(request.get("oldObject"), dict):
        old = engine.evaluate(_resource(request, "oldObject"), facts, deadline)
        pre_existing = {f.key() for f in old.findings if f.blocking}
    trusted = request.get("operation") == "CREATE" and trusted_requester(
        request, engine.config.trusted_controllers)
    blocking: list[Finding] = []
    warnings: list[str] = []
    for finding in findings:
        if finding.blocking:
            if finding.key() in pre_existing:
                warnings.append(_warning(finding, "(already present before this update) "))
            elif trusted:
                warnings.append(_warning(finding, "(owner admitted by its controller) "))
            else:
                blocking.append(finding)
        elif finding.action == "warn" and finding.result in ("fail", "error"):
            warnings.append(_warning(finding))
    warnings += [f"aiadmit: {note}" for note in evaluation.notes]
    if blocking:
        return deny(request, deny_message(resource, blocking), warnings=fit_warnings(warnings),
                    findings=findings, denied_policies=sorted({f.policy for f in blocking}))
    fitted = fit_warnings(warnings)
    return allow(request, "warned" if fitted else "allowed", fitted, findings=findings)


# ---------------------------------------------------------------------- mutate
def _templates_changed(engine: Engine, request: dict) -> bool:
    """On UPDATE, whether any pod template differs: only then is adding to it free of a surprise rollout."""
    try:
        new = build_workload(_resource(request, "object"), engine.config.classification)
        old = build_workload(_resource(request, "oldObject"), engine.config.classification)
    except ShapeError:
        return False
    if new is None or old is None:
        return False
    return [t.spec for t in new.templates] != [t.spec for t in old.templates]


def mutate(engine: Engine, request: dict, facts: Optional[ClusterFacts] = None,
           deadline: Optional[float] = None) -> Outcome:
    """JSON Patch for CREATE; for UPDATE only when the pod templates changed anyway, and never for a Pod

    (its spec is immutable: a patch that adds a volume would make the update fail)."""
    early = _precheck(request)
    if early is not None:
        return early if early.outcome == "skipped" else allow(request, "invalid", problems=[
            early.response["status"]["message"]])
    resource = _resource(request, "object")
    if request.get("operation") == "UPDATE" and (resource.kind == "Pod" or not isinstance(
            request.get("oldObject"), dict) or not _templates_changed(engine, request)):
        return allow(request, "allowed")
    mutation = engine.mutate(resource, facts, deadline)
    problems = list(mutation.errors)
    warnings = [f"aiadmit: mutation not applied: {e}" for e in mutation.errors]
    if not mutation.operations:
        return allow(request, "allowed", fit_warnings(warnings), problems=problems)
    trouble = check_patch(resource.obj, mutation.operations, mutation.patched)
    if trouble:
        problems.append(f"patch withheld: {trouble}")
        return allow(request, "error", fit_warnings(warnings + [f"aiadmit: patch withheld: {trouble}"]),
                     problems=problems)
    response_warnings = fit_warnings(warnings)
    outcome = allow(request, "patched", response_warnings, problems=problems)
    outcome.response["patchType"] = "JSONPatch"
    outcome.response["patch"] = base64.b64encode(
        json.dumps(mutation.operations, separators=(",", ":"), sort_keys=True).encode()).decode("ascii")
    outcome.patched_policies = sorted(mutation.by_policy)
    return outcome


# ---------------------------------------------------------------------- patch check
def check_patch(document: dict, operations: list[dict], expected: Optional[dict] = None) -> Optional[str]:
    """None when every `add` applies to `document` in order (RFC 6902 rules) and gives `expected`; else why not.

    The engine only emits `add`; anything else is refused rather than guessed at.
    """
    working = copy.deepcopy(document)
    for index, op in enumerate(operations):
        if not isinstance(op, dict) or op.get("op") != "add" or not isinstance(op.get("path"), str) \
                or "value" not in op:
            return f"operation {index}: only well-formed 'add' operations are produced, got {op!r:.120}"
        path = op["path"]
        if not path.startswith("/"):
            return f"operation {index}: path {path!r} is not a JSON pointer"
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]
        parent: Any = working
        for token in tokens[:-1]:
            if isinstance(parent, dict) and token in parent:
                parent = parent[token]
            elif isinstance(parent, list) and token.isdigit() and int(token) < len(parent):
                parent = parent[int(token)]
            else:
                return f"operation {index}: {path}: parent does not exist"
        last = tokens[-1]
        value = copy.deepcopy(op["value"])
        if isinstance(parent, dict):
            parent[last] = value
        elif isinstance(parent, list):
            if last == "-":
                parent.append(value)
            elif last.isdigit() and int(last) <= len(parent):
                parent.insert(int(last), value)
            else:
                return f"operation {index}: {path}: index out of range"
        else:
            return f"operation {index}: {path}: parent is neither object nor array"
    if expected is not None and working != expected:
        return "applying the patch does not give the object the engine computed"
    return None


def error_outcome(request: dict, endpoint: str, reason: str) -> Outcome:
    """An internal failure: validate fails closed (deny, code 500 inside the review); mutate admits unpatched."""
    if endpoint == "mutate":
        return allow(request, "error", fit_warnings([f"aiadmit: not mutated: {reason}"]), problems=[reason])
    return deny(request, f"aiadmit could not check this object: {reason}", code=500, outcome="error",
                problems=[reason])
