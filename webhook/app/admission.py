"""The admission adapter: AdmissionReview -> Resource(s) -> engine -> AdmissionResponse.

Pure functions: no Flask, no sockets, no clocks. The server (app/server.py)
adds transport, the time budget, metrics and logs around them; the request is
read by inputs/review.py and the answer written by outputs/response.py.

What is decided here, and why:
- on UPDATE a violation the old object already had is demoted to a warning:
  relabelling or scaling an old workload must never break it. "Already had"
  compares what offends, not only where: the same rule at the same field with
  the same message, or a value there that is no wider than the old one (a
  capability list that only shrank). `NET_BIND_SERVICE` becoming `SYS_ADMIN`,
  or a hostPath `/var/log/app` becoming `/`, is a new violation.
- a requester listed in `trustedControllers` creating an object whose
  controller owner derives it wholly (kinds.yaml `derives`, k8s/provenance.py)
  gets deny lowered to warn for the policies that judged that owner's kind:
  the owner's check saw all of it. userInfo is set by the API server; an
  ownerReference is not proof of anything (a user can write one), so it counts
  only with the requester, and only for an owner kind this webhook checks.
- `/mutate` answers a JSON Patch only when there is something to change, and
  only after the `jsonpatch` library applied it to a copy of the object and got
  what the engine computed (`check_patch`, independent of the code that built
  the patch): the API server rejects a patch that does not apply whatever the
  failure policy says.
"""

from __future__ import annotations

import fnmatch
import re
from functools import lru_cache, partial
from typing import Optional

from webhook.engine.core import Engine
from webhook.app.intree import left_to_webhook, mutated_in_tree
from webhook.engine.deadline import check_deadline, copy_json
from webhook.inputs.review import CHECKED_OPERATIONS, CHECKED_SUBRESOURCES, SKIPPED_OPERATIONS, resource_of
from webhook.k8s.provenance import deriving_owner
from webhook.k8s.workload import ShapeError, build_workload
from webhook.model import pointer as jp
from webhook.model.facts import ClusterFacts
from webhook.model.findings import Finding
from webhook.outputs.response import (Outcome, allow, deny, deny_message, fit_warnings, one_line, patched,
                                      warning)


def _precheck(request: dict) -> Optional[Outcome]:
    """The answer for requests that need no policy: DELETE, CONNECT, subresources, and broken ones.

    Two subresources are checked: `ephemeralcontainers` (kubectl debug) adds containers to a running pod, and
    `resize` (in-place resize, GA in Kubernetes 1.35) changes the resources of a running pod's containers. The
    object of either request is the whole pod after the change, so every policy judges it, and its UPDATE compares
    with the old pod: only what the debug container or the new resources bring is denied (a memory limit taken
    below /dev/shm, a request taken to zero), never what the pod had already.
    """
    operation = request.get("operation")
    sub = request.get("subResource")
    if operation in SKIPPED_OPERATIONS or (sub and sub not in CHECKED_SUBRESOURCES):
        return allow(request, "skipped")
    if operation not in CHECKED_OPERATIONS:
        return deny(request, f"aiadmit: unsupported operation {operation!r}", code=400, outcome="invalid")
    if not isinstance(request.get("object"), dict):
        return deny(request, "aiadmit: request.object must be a Kubernetes object", code=400, outcome="invalid")
    if operation == "UPDATE" and request.get("oldObject") is not None and not isinstance(request["oldObject"], dict):
        return deny(request, "aiadmit: request.oldObject must be a Kubernetes object", code=400, outcome="invalid")
    return None


# ---------------------------------------------------------------------- trust
@lru_cache(maxsize=8)
def _globs(patterns: tuple[str, ...]) -> re.Pattern:
    """The globs as one regex: what `any(fnmatch.fnmatchcase(name, p) for p in patterns)` answers, in one match
    instead of a call per pattern on every CREATE (18 per review with the default configuration's list)."""
    return re.compile("|".join(fnmatch.translate(p) for p in patterns))


def trusted_owner(request: dict, patterns: tuple[str, ...], group: str, kind: str) -> Optional[str]:
    """The kind of the owner whose check covers this CREATE by a configured controller identity, else None
    (see module docstring)."""
    if request.get("operation") != "CREATE":
        return None
    user = request.get("userInfo") if isinstance(request.get("userInfo"), dict) else {}
    username = user.get("username")
    if not isinstance(username, str) or not patterns or not _globs(patterns).match(username):
        return None
    owner = deriving_owner(request["object"], group, kind)
    return owner[1] if owner else None


# ---------------------------------------------------------------------- update
def _not_wider(new, old) -> bool:
    """Whether the value a finding points at offends no more than before: the same, or a list that only lost items."""
    if new == old:
        return True
    return isinstance(new, list) and isinstance(old, list) and all(item in old for item in new)


def findings_before(engine: Engine, old_evaluation) -> dict:
    """The blocking findings of the old object, by key (Finding.key) -> their messages: what an UPDATE may keep.

    A policy reading `oldObject` judges a change: on the old object (which has no old object of its own) its verdict
    means nothing, and must not excuse the same finding on the new one as "already present"."""
    judges_change = {p.id for p in engine.policies if any("oldObject" in e.variables for e in p.expressions())}
    before: dict = {}
    for f in old_evaluation.findings:
        if f.blocking and f.policy not in judges_change:
            before.setdefault(f.key(), []).append(f.message)
    return before


def already_there(finding: Finding, before: dict, new_obj: dict, old_obj: dict) -> bool:
    """Whether the old object had this violation: same policy, rule, field and result, and the same message or a
    value at the field no wider than the old one (module docstring)."""
    old = before.get(finding.key())
    if not old:
        return False
    if any(message == finding.message for message in old):
        return True
    return _not_wider(jp.resolve(new_obj, finding.pointer), jp.resolve(old_obj, finding.pointer))


# ---------------------------------------------------------------------- validate
def validate(engine: Engine, request: dict, facts: Optional[ClusterFacts] = None,
             deadline: Optional[float] = None) -> Outcome:
    early = _precheck(request)
    if early is not None:
        return early
    resource = resource_of(request, "object")
    evaluation = engine.evaluate(resource, facts, deadline, in_tree=False)  # MAPs: the API server runs them
    if evaluation.errors:
        detail = "; ".join(one_line(e.message) for e in evaluation.errors[:5])
        return deny(request, f"aiadmit cannot check {resource.describe()}: {detail}", code=400,
                    outcome="invalid", findings=evaluation.findings)
    findings = left_to_webhook(engine, evaluation.findings, resource.kind, resource.group, request.get("operation"))
    before: dict = {}  # finding key -> the messages the old object's findings of that key had
    old_obj: dict = {}
    if request.get("operation") == "UPDATE" and isinstance(request.get("oldObject"), dict):
        old_resource = resource_of(request, "oldObject")
        old_obj = old_resource.obj
        before = findings_before(engine, engine.evaluate(old_resource, facts, deadline, in_tree=False))
    owner = trusted_owner(request, engine.config.trusted_controllers, resource.group, resource.kind)
    blocking: list[Finding] = []
    warnings: list[str] = []
    for count, finding in enumerate(findings):
        if not count % 4096:
            check_deadline(deadline)  # 30,000 containers make 360,000 findings: this loop too must stop in time
        if finding.blocking:
            policy = engine.by_id.get(finding.policy)  # None: a ValidatingAdmissionPolicy's, judged as the API server does
            if policy is not None and before and already_there(finding, before, resource.obj, old_obj):
                warnings.append(warning(finding, "(already present before this update) "))
            elif policy is not None and owner is not None and policy.match.admits_kind(owner):
                warnings.append(warning(finding, "(owner admitted by its controller) "))
            else:
                blocking.append(finding)
        elif finding.action == "warn" and finding.result in ("fail", "error"):
            warnings.append(warning(finding))
    warnings += [f"aiadmit: {note}" for note in evaluation.notes]
    check_deadline(deadline)
    exemptions = sorted(evaluation.exemptions)
    if blocking:
        return deny(request, deny_message(resource, blocking, deadline), warnings=fit_warnings(warnings),
                    findings=findings, denied_policies=sorted({f.policy for f in blocking}), exemptions=exemptions)
    fitted = fit_warnings(warnings)
    return allow(request, "warned" if fitted else "allowed", fitted, findings=findings, exemptions=exemptions)


# ---------------------------------------------------------------------- mutate
def _templates_changed(engine: Engine, request: dict, deadline: Optional[float]) -> bool:
    """On UPDATE, whether any pod template differs: only then is adding to it free of a surprise rollout."""
    tick = partial(check_deadline, deadline)
    try:
        new = build_workload(resource_of(request, "object"), engine.config.classification, tick=tick)
        old = build_workload(resource_of(request, "oldObject"), engine.config.classification, tick=tick)
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
    resource = resource_of(request, "object")
    if request.get("operation") == "UPDATE" and (resource.kind == "Pod" or not isinstance(
            request.get("oldObject"), dict) or not _templates_changed(engine, request, deadline)):
        return allow(request, "allowed")
    skip = mutated_in_tree(engine, resource.kind, resource.group, request.get("operation"))
    mutation = engine.mutate(resource, facts, deadline, skip, in_tree=False)
    problems = list(mutation.errors)
    warnings = [f"aiadmit: mutation not applied: {e}" for e in mutation.errors]
    if not mutation.operations:
        return allow(request, "allowed", fit_warnings(warnings), problems=problems)
    trouble = check_patch(resource.obj, mutation.operations, mutation.patched, deadline)
    if trouble:
        problems.append(f"patch withheld: {trouble}")
        return allow(request, "error", fit_warnings(warnings + [f"aiadmit: patch withheld: {trouble}"]),
                     problems=problems)
    return patched(request, mutation.operations, warnings, list(mutation.by_policy), problems)


# ---------------------------------------------------------------------- patch check
_PATCH_CHUNK = 512  # operations applied between two deadline checks


def check_patch(document: dict, operations: list[dict], expected: Optional[dict] = None,
                deadline: Optional[float] = None) -> Optional[str]:
    """None when the patch applies to `document` (the `jsonpatch` library, RFC 6902) and gives `expected`;
    else why not. The engine only emits `add`; anything else is refused rather than guessed at.

    Applied in chunks with the deadline checked between them (BudgetExceeded): a 30,000-container pod makes a
    60,000-operation patch, seconds of work that must not outlive the time budget."""
    import jsonpatch  # here: only the webhook's /mutate needs it, not every command-line start

    for index, op in enumerate(operations):
        if not isinstance(op, dict) or op.get("op") != "add" or not isinstance(op.get("path"), str) \
                or "value" not in op:
            return f"operation {index}: only well-formed 'add' operations are produced, got {op!r:.120}"
    check_deadline(deadline)
    try:
        result = copy_json(document, deadline)
        for start in range(0, len(operations), _PATCH_CHUNK):
            check_deadline(deadline)
            result = jsonpatch.JsonPatch(operations[start:start + _PATCH_CHUNK]).apply(result, in_place=True)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        return f"the patch does not apply: {exc}"
    check_deadline(deadline)
    if expected is not None and result != expected:
        return "applying the patch does not give the object the engine computed"
    return None

