"""What the webhook leaves to the API server when the exported policies are installed (config `inTree`).

Why here: the same exporter that writes the ValidatingAdmissionPolicies (outputs/vap.py) decides which rules of
which kinds they enforce, from the same policies and config, so the webhook and the API server never both report a
rule, and never both skip one. Only CREATE: the export covers no UPDATE (docs/operations.md).
"""

from __future__ import annotations

import threading
import weakref
from typing import Optional

from webhook.k8s.versions import version
from webhook.outputs.vap import export

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def exported(engine) -> dict:
    """(policy id, rule name) -> the (kind, group) pairs its exported validation covers; {} when `inTree` is off.
    Under (policy id, None): the kinds whose objects its exported MutatingAdmissionPolicy mutates (all or none of a
    policy's mutations are exported)."""
    if engine.config.in_tree is None:
        return {}
    with _LOCK:
        found = _CACHE.get(engine)
        if found is None:
            found = {}
            for result in export(engine.policies, engine.config, version(engine.config.in_tree)):
                for rule in result.rules:
                    found[(result.policy.id, rule)] = frozenset(result.kinds)
                if result.mutations:
                    found[(result.policy.id, None)] = frozenset(result.kinds_mutated)
            _CACHE[engine] = found
    return found


def mutated_in_tree(engine, kind: str, group: str, operation: Optional[str]) -> frozenset:
    """The ids of the policies whose mutations the API server applies to this object (CREATE only), which the
    mutating webhook then leaves out."""
    if operation != "CREATE":
        return frozenset()
    return frozenset(policy for (policy, rule), kinds in exported(engine).items()
                     if rule is None and (kind, group) in kinds)


def left_to_webhook(engine, findings: list, kind: str, group: str, operation: Optional[str]) -> list:
    """The findings the webhook still reports: all of them, but on CREATE not those of an exported rule for this
    kind (the API server's policy reports those)."""
    if operation != "CREATE":
        return findings
    covered = exported(engine)
    if not covered:
        return findings
    return [f for f in findings if (kind, group) not in covered.get((f.policy, f.rule), ())]
