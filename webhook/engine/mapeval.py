"""Running MutatingAdmissionPolicies offline: the object the API server (v1.37.2) would store after them.

Why its own module: a MAP changes the object, where a VAP only judges it (engine/vap.py, whose matching, params
and request this shares). The order is the API server's (k8s.io/apiserver admission/plugin/policy/mutating): for
each binding in order, the policy's matchConstraints, the binding's matchResources, the param objects, the
matchConditions, then every mutation in order, each on the object the previous one left, the object defaulted
again after each (the API server's defaulter runs after every patch). A JSONPatch is applied as
gopkg.in/evanphx/json-patch.v4 applies it (model/rfc6902.py): a failing `test` leaves the object as it was, without
an error; an ApplyConfiguration is merged as server-side apply merges (k8s/applymerge.py). An error (an expression,
a patch that does not apply, a type mismatch) is decided by the policy's failurePolicy: Fail denies the request with
the API server's message (`policy 'P' with binding 'B' denied request: ...`), Ignore leaves that mutation out.
reinvocationPolicy IfNeeded: once any mutation was applied, every IfNeeded policy that reached its mutations runs
once more, in order, after all of them (the API server's reinvocation: one more pass, only those).
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from webhook.cel import messages
from webhook.cel.environment import Activation
from webhook.cel.values import Variables
from webhook.engine.deadline import check_deadline
from webhook.engine.vap import Unknown, _namespace_object, _params, _request, matches
from webhook.k8s import applymerge
from webhook.k8s.defaults import defaulted
from webhook.model import rfc6902
from webhook.model.facts import ClusterFacts
from webhook.model.resource import Resource


class Outcome:
    """What the MAPs did to one object: the object after them, and what was said on the way."""

    patched: Any
    steps: list  # (policy, binding, before, after): each invocation that changed it
    denied: list  # (policy, binding, the API server's whole message)
    skipped: list  # (policy, binding, reason): not decidable offline
    matched: list  # policy names a binding matched

    def __init__(self, patched: Any, steps: list | None = None, denied: list | None = None, skipped: list | None = None,
                 matched: list | None = None) -> None:
        self.patched = patched
        self.steps = [] if steps is None else steps
        self.denied = [] if denied is None else denied
        self.skipped = [] if skipped is None else skipped
        self.matched = [] if matched is None else matched


def mutate(intree, resource: Resource, facts: ClusterFacts, deadline: Optional[float] = None,
           obj: Any = None, redefault: bool = True) -> Outcome:
    """The object after every MAP binding of `intree` (the object as the API server defaults it, or `obj`).
    `redefault` False: not defaulted again after each mutation, so the steps hold only what the policies wrote
    (what `aiadmit fix` writes into a manifest)."""
    current = defaulted(resource.obj, resource.group, resource.kind) if obj is None else copy.deepcopy(obj)
    outcome = Outcome(current)
    invocations = []
    for binding in intree.mutating_bindings:
        check_deadline(deadline)
        policy = intree.mutating.get(binding.policy)
        if policy is None:
            continue
        try:
            if not matches(policy.match, resource, facts) or not matches(binding.match, resource, facts):
                continue
        except Unknown as exc:
            outcome.skipped.append((policy.name, binding.name, f"skipped: {exc}"))
            continue
        if policy.name not in outcome.matched:
            outcome.matched.append(policy.name)
        params = _params(policy, binding, resource, intree)
        if params is None:
            if binding.param_ref is not None and binding.param_ref.get("parameterNotFoundAction") == "Allow":
                continue
            outcome.denied.append((policy.name, binding.name, denial(
                policy.name, binding.name, "failed to configure binding: no params found for policy binding with "
                "`Deny` parameterNotFoundAction")))
            continue
        invocations += [(policy, binding, param) for param in params]
    namespace = _namespace_object(resource, facts)
    again, dirty = [], False
    for policy, binding, param in invocations:
        check_deadline(deadline)
        reached, patched = _invoke(policy, binding, param, resource, namespace, outcome, redefault)
        dirty = dirty or patched
        if reached and policy.reinvocation == "IfNeeded":
            again.append((policy, binding, param))
    if dirty:  # a mutation was applied: the API server reinvokes the IfNeeded policies once, in order
        for policy, binding, param in again:
            check_deadline(deadline)
            _invoke(policy, binding, param, resource, namespace, outcome, redefault)
    return outcome


def _invoke(policy, binding, param, resource: Resource, namespace: Optional[dict], outcome: Outcome,
            redefault: bool = True) -> tuple[bool, bool]:
    """One policy, one binding, one param on the current object: (whether its matchConditions let it reach its
    mutations, whether one was applied: the API server's `Dirty`, which asks for the reinvocation)."""
    before = outcome.patched
    context = Activation(object=before, oldObject=resource.origin.old_object, request=_request(resource),
                         params=param, namespaceObject=namespace, authorizer=None)
    context["variables"] = Variables({name: check.expression for name, check in policy.variables.items()
                                      if check.expression is not None}, context)
    for name, check in policy.conditions:
        if check.offline is not None:
            outcome.skipped.append((policy.name, binding.name, f"skipped: matchConditions[{name}] {check.offline}"))
            return False, False
        try:
            value = check.expression.run(context)
        except Exception as exc:  # noqa: BLE001 - an expression error is the failurePolicy's to decide
            _failed(policy, binding, f"expression '{check.source}' resulted in error: {exc}", outcome)
            return False, False
        if value is not True:
            return False, False
    applied = False
    for mutation in policy.mutations:
        if mutation.check.offline is not None:
            outcome.skipped.append((policy.name, binding.name,
                                    f"skipped: mutations[{mutation.index}] {mutation.check.offline}"))
            continue
        context["object"] = outcome.patched
        context["variables"] = Variables({name: check.expression for name, check in policy.variables.items()
                                          if check.expression is not None}, context)
        try:
            patched = _apply(mutation, context, outcome.patched, resource)
        except _Failure as exc:
            _failed(policy, binding, str(exc), outcome)
            continue
        unknown = applymerge.undeclared(patched, applymerge.root_type(resource.api_version, resource.kind))
        if unknown:  # the patched object does not decode into its type: an internal error, whatever failurePolicy
            outcome.denied.append((policy.name, binding.name, f"Internal error occurred: strict decoding error: "
                                   f"unknown field \"{unknown[0][1:]}\""))
            return True, applied
        outcome.patched = defaulted(patched, resource.group, resource.kind) if redefault else patched
        applied = True
    if outcome.patched != before:
        outcome.steps.append((policy.name, binding.name, before, outcome.patched))
    return True, applied


class _Failure(Exception):
    """A mutation that failed, worded as the API server words it after `denied request: `."""


def _apply(mutation, context: Activation, current: Any, resource: Resource) -> Any:
    try:
        value = mutation.check.expression.run(context)
    except Exception as exc:  # noqa: BLE001 - CEL's errors are the failurePolicy's to decide
        raise _Failure(f"expression '{mutation.check.source}' resulted in error: {exc}") from None
    if mutation.patch_type == "JSONPatch":
        if not isinstance(value, list):
            raise _Failure("type mismatch: JSONPatchType.expression should evaluate to array")
        operations = []
        for item in value:
            if not isinstance(item, messages.Message) or item.type_name != messages.JSONPATCH:
                raise _Failure("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch")
            operation = {"op": item.get("op", ""), "path": item.get("path", "")}
            if item.get("from"):
                operation["from"] = item["from"]
            if "value" in item:  # a null value is written (as null); an unset one is absent, which adds null too
                problems = messages.type_mismatches(item["value"])
                if problems:
                    raise _Failure("type mismatch: " + "\n".join(problems))
                try:
                    operation["value"] = messages.to_json(item["value"])
                except Exception as exc:  # noqa: BLE001
                    raise _Failure(f"JSONPath valueExpression evaluated to a type that could not marshal to JSON: "
                                   f"{exc}") from None
            operations.append(operation)
        try:
            return rfc6902.apply(current, operations)
        except rfc6902.TestFailed:
            return current
        except rfc6902.PatchError as exc:
            raise _Failure(f"JSON Patch: {exc}") from None
    if not isinstance(value, messages.Message) or value.type_name != messages.OBJECT:
        raise _Failure(f"unsupported return type from ApplyConfiguration expression: {type(value).__name__}")
    problems = messages.type_mismatches(value)
    if problems:
        raise _Failure("type mismatch: " + "\n".join(problems))
    try:
        configuration = messages.to_json(value)
        return applymerge.apply(current, configuration, resource.api_version, resource.kind)
    except applymerge.MergeError as exc:
        raise _Failure(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a value that is not JSON
        raise _Failure(f"error applying patch: {exc}") from None


def _failed(policy, binding, message: str, outcome: Outcome) -> None:
    if policy.failure_policy == "Ignore":
        return
    outcome.denied.append((policy.name, binding.name, denial(policy.name, binding.name, message)))


def denial(policy: str, binding: str, message: str) -> str:
    """The API server's words for a MAP that fails the request."""
    return f"policy '{policy}' with binding '{binding}' denied request: {message}"
