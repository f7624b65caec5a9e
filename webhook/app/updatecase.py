"""A policy test case run as an UPDATE: the case's resource is the new object, its `oldObject` the stored one.

Why: a ValidatingAdmissionPolicy's `oldObject` expressions, and aiadmit's own UPDATE rule (a violation the old
object already had is demoted to a warning, app/admission.py), can only be tested with both objects. The webhook's
answer is reproduced from the same functions it uses: the old object is evaluated as the old object of an UPDATE
review (no old object of its own), its blocking findings are what the update may keep (`findings_before`), and a
failing policy whose every blocking finding the old object had is `already-present` (the webhook admits the update
with a warning), not `fail`.
"""

from __future__ import annotations

from typing import Optional

from webhook.app.admission import already_there, findings_before
from webhook.engine.core import Engine
from webhook.model.findings import Finding
from webhook.model.resource import Resource
from webhook.model.valueclass import replace

ALREADY_PRESENT = "already-present"


def as_update(new: Resource, old: Resource) -> tuple[Resource, Resource]:
    """The two objects as an UPDATE review gives them to the engine: the new one with `oldObject` set."""
    updated = Resource(new.obj, replace(new.origin, operation="UPDATE", old_object=old.obj))
    stored = Resource(old.obj, replace(old.origin, operation="UPDATE", old_object=None))
    return updated, stored


def evaluate(engine: Engine, new: Resource, old: Resource, facts) -> tuple:
    """(the new object's evaluation, the findings the update may keep), as the webhook computes them."""
    updated, stored = as_update(new, old)
    return engine.evaluate(updated, facts), findings_before(engine, engine.evaluate(stored, facts))


def judged(engine: Engine, got: str, findings: list[Finding], before: dict, new: Resource,
           old: Resource) -> str:
    """`got` for an UPDATE: `already-present` when the policy (aiadmit's; a ValidatingAdmissionPolicy is judged
    as the API server judges it, without this rule) fails only with blocking findings the old object had."""
    if got != "fail" or engine.by_id.get(findings[0].policy if findings else "") is None:
        return got
    failing = [f for f in findings if f.result in ("fail", "error")]
    if failing and all(f.blocking and already_there(f, before, new.obj, old.obj) for f in failing):
        return ALREADY_PRESENT
    return got


def selector_problem(ref) -> Optional[str]:
    """Why an `oldObject` selector cannot select, or None."""
    if not isinstance(ref, dict) or not {"kind", "name"} <= set(ref) or set(ref) - {"kind", "name", "namespace"}:
        return "oldObject selects one of the test's oldResources by kind and name (and optionally namespace)"
    return None
