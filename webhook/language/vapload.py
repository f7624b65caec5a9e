"""ValidatingAdmissionPolicy and its Binding (admissionregistration.k8s.io/v1) read as policies: any VAP, offline.

Why in the language layer: a user's own in-tree policy is a policy like aiadmit's, given with `--policies FILE`
(docs/cli.md), and it must fail at load as the API server refuses it: a wrong shape, or an expression that does not
type-check in the VAP environment (`object`, `oldObject`, `request`, `params`, `namespaceObject`, `authorizer`,
`variables` declared as the API server declares them), each at file:line:col. The evaluation is
engine/vap.py. Other documents in the same files are the policies' param objects when their apiVersion and kind
are a policy's `paramKind`; anything else is an error, as before.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from webhook.cel.constants import DYN, Struct
from webhook.cel.limits import Limits
from webhook.cel.environment import CelError, Expression
from webhook.cel.values import ParseError
from webhook.model.lazyre import Lazy
from webhook.model.resource import Resource

API = "admissionregistration.k8s.io/v1"
POLICY, BINDING = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
KINDS = (POLICY, BINDING)
MUTATING_KINDS = ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")  # language/mapload.py reads them
ACTIONS = {"Deny": "deny", "Warn": "warn", "Audit": "audit"}
_BASE = {"object": DYN, "oldObject": DYN, "request": DYN, "params": DYN, "namespaceObject": DYN, "authorizer": DYN}
# What an offline run cannot answer: who asks (RBAC through `authorizer`, the user in `request.userInfo`).
_OFFLINE = ((Lazy(r"\bauthorizer\b"), "reads `authorizer` (RBAC answers), which no offline run can give"),
            (Lazy(r"\brequest\s*\.\s*userInfo\b"), "reads `request.userInfo`, unknown offline"))


class Check:
    """One CEL expression of a policy, checked at load; `offline` names why it cannot run offline, if so."""

    expression: Optional[Expression]  # None where `offline` says why it is not run (only parsed)
    pointer: str
    offline: Optional[str] = None
    source: str = ""

    def __init__(self, expression: Optional[Expression], pointer: str, offline: Optional[str] = None,
                 source: str = "") -> None:
        self.expression = expression
        self.pointer = pointer
        self.offline = offline
        self.source = source


class Validation:
    check: Check
    message: Optional[str]
    message_expression: Optional[Check]
    reason: str

    def __init__(self, check: Check, message: Optional[str], message_expression: Optional[Check], reason: str) -> None:
        self.check = check
        self.message = message
        self.message_expression = message_expression
        self.reason = reason


class InTreePolicy:
    name: str
    resource: Resource
    failure_policy: str  # Fail | Ignore
    match: dict
    conditions: list  # (name, Check)
    variables: dict  # name -> Check, in order
    validations: list  # Validation
    annotations: list  # (key, Check)
    param_kind: Optional[dict]

    def __init__(self, name: str, resource: Resource, failure_policy: str, match: dict, conditions: list,
                 variables: dict, validations: list, annotations: list, param_kind: Optional[dict]) -> None:
        self.name = name
        self.resource = resource
        self.failure_policy = failure_policy
        self.match = match
        self.conditions = conditions
        self.variables = variables
        self.validations = validations
        self.annotations = annotations
        self.param_kind = param_kind


class InTreeBinding:
    name: str
    resource: Resource
    policy: str
    actions: tuple  # of deny | warn | audit
    match: Optional[dict]
    param_ref: Optional[dict]

    def __init__(self, name: str, resource: Resource, policy: str, actions: tuple, match: Optional[dict],
                 param_ref: Optional[dict]) -> None:
        self.name = name
        self.resource = resource
        self.policy = policy
        self.actions = actions
        self.match = match
        self.param_ref = param_ref


class InTree:
    """Every in-tree policy, binding and param object of a set of policy files."""

    policies: dict
    bindings: list
    params: list
    mutating: dict  # MutatingAdmissionPolicies (language/mapload.py)
    mutating_bindings: list

    def __init__(self, policies: dict | None = None, bindings: list | None = None, params: list | None = None,
                 mutating: dict | None = None, mutating_bindings: list | None = None) -> None:
        self.policies = {} if policies is None else policies
        self.bindings = [] if bindings is None else bindings
        self.params = [] if params is None else params
        self.mutating = {} if mutating is None else mutating
        self.mutating_bindings = [] if mutating_bindings is None else mutating_bindings

    def __bool__(self) -> bool:
        return bool(self.policies or self.bindings or self.mutating or self.mutating_bindings)


def is_intree(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("apiVersion") == API and doc.get("kind") in KINDS + MUTATING_KINDS


class _Problems(list):
    def add(self, resource: Resource, pointer: str, message: str, offset: Optional[int] = None) -> None:
        self.append((resource, pointer, message, offset))


def read_intree(resources: list, others: list, limits: Optional[Limits] = None,
                mutating: Any = None) -> tuple[InTree, list, list]:
    """(the in-tree set, the `others` that are not its param objects, problems as (resource, pointer, message,
    offset in the expression or None)). A binding naming a policy that is not given is a problem: it would bind
    nothing, silently. `mutating(resources, found, problems, limits)` reads the MutatingAdmissionPolicies
    (language/mapload.py `read`, which builds on this module's checks)."""
    found, problems = InTree(), _Problems()
    if mutating is not None:
        mutating([r for r in resources if r.kind in MUTATING_KINDS], found, problems, limits)
    for resource in resources:
        if resource.kind in MUTATING_KINDS:
            continue
        if resource.kind == POLICY:
            policy = _policy(resource, problems, limits)
            if policy is None:
                continue
            if policy.name in found.policies:
                problems.add(resource, "/metadata/name", f"{POLICY} {policy.name!r} is given twice")
                continue
            found.policies[policy.name] = policy
        else:
            binding = _binding(resource, problems)
            if binding is not None:
                found.bindings.append(binding)
    for binding in found.bindings:
        if binding.policy not in found.policies:
            problems.add(binding.resource, "/spec/policyName", f"no {POLICY} named {binding.policy!r} is given")
    kinds = {(p.param_kind.get("apiVersion"), p.param_kind.get("kind"))
             for p in list(found.policies.values()) + list(found.mutating.values()) if p.param_kind}
    rest = []
    for resource in others:
        if (resource.api_version, resource.kind) in kinds:
            found.params.append(resource)
        else:
            rest.append(resource)
    return found, rest, problems


def _map(resource: Resource, pointer: str, value: Any, problems: _Problems, required: bool = False) -> dict:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        problems.add(resource, pointer, "must be a map" if value is not None else "is required")
        return {}
    return value


def _list(resource: Resource, pointer: str, value: Any, problems: _Problems) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(resource, pointer, "must be a list")
        return []
    return value


def _name(resource: Resource, problems: _Problems) -> Optional[str]:
    name = (resource.obj.get("metadata") or {}).get("name") if isinstance(resource.obj.get("metadata"), dict) else None
    if not isinstance(name, str) or not name:
        problems.add(resource, "/metadata/name" if isinstance(resource.obj.get("metadata"), dict) else "/metadata",
                     "is required")
        return None
    return name


def _check(resource: Resource, pointer: str, source: Any, declarations: dict, problems: _Problems,
           limits: Optional[Limits], want: Optional[str]) -> Optional[Check]:
    """The expression at `pointer` checked in the VAP environment, of type `want` (bool or string) or dyn; `want`
    None: any type (a variable, an audit annotation's value)."""
    if not isinstance(source, str) or not source.strip():
        problems.add(resource, pointer, "must be a non-empty CEL expression")
        return None
    offline = next((why for pattern, why in _OFFLINE if pattern.search(source)), None)
    offline = offline or next((f"reads variables.{name}, which {why.split(' ', 1)[1]}" for name, why in
                               declarations.get("offline", {}).items()
                               if re.search(rf"\bvariables\s*\.\s*{re.escape(name)}\b", source)), None)
    try:
        if offline:  # `authorizer`'s library is not aiadmit's: such an expression is parsed only, and skipped
            from webhook.cel.parser import parse_with_positions  # a load's, never a kept bundle's (bundlecache.py)

            parse_with_positions(source)
            return Check(None, pointer, offline, source)
        expression = Expression(source, None, None, {k: v for k, v in declarations.items() if k != "offline"},
                                limits)
    except ParseError as exc:
        problems.add(resource, pointer, f"compilation failed: {str(exc).split(' at column ')[0]}", exc.column - 1)
        return None
    except CelError as exc:
        problems.add(resource, pointer, f"compilation failed: {exc.message}", exc.offset)
        return None
    if want is not None and expression.type not in (want, DYN):
        problems.add(resource, pointer, f"must evaluate to {want}, not {expression.type}")
        return None
    return Check(expression, pointer, None, source)


_RULE_FIELDS = ("apiGroups", "apiVersions", "operations", "resources")


def _rules(resource: Resource, at: str, match: dict, problems: _Problems, required: bool) -> None:
    """resourceRules (required in a policy) and excludeResourceRules: each names groups, versions, operations and
    resources, as the API server's validation requires; an empty one would silently match nothing."""
    if required and not match.get("resourceRules"):
        problems.add(resource, f"{at}/resourceRules" if "resourceRules" in match else at, "resourceRules is required")
    if match.get("matchPolicy", "Equivalent") not in ("Exact", "Equivalent"):
        problems.add(resource, f"{at}/matchPolicy", f"must be Exact or Equivalent, not {match['matchPolicy']!r}")
    for field in ("resourceRules", "excludeResourceRules"):
        for index, rule in enumerate(_list(resource, f"{at}/{field}", match.get(field), problems)):
            if not isinstance(rule, dict):
                problems.add(resource, f"{at}/{field}/{index}", "must be a map")
                continue
            for name in _RULE_FIELDS:
                values = rule.get(name)
                if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
                    problems.add(resource, f"{at}/{field}/{index}/{name}" if name in rule else f"{at}/{field}/{index}",
                                 f"{name} must be a non-empty list of strings")


def conditions_and_variables(resource: Resource, spec: dict, declarations: dict, problems: _Problems,
                             limits: Optional[Limits]) -> tuple[list, dict]:
    """A policy's matchConditions and variables (a VAP's or a MAP's: the API server compiles both alike), each
    variable checked with the ones before it; `declarations` gains `variables` and `offline` for what follows."""
    conditions: list = []
    variables: dict = {}
    for index, item in enumerate(_list(resource, "/spec/matchConditions", spec.get("matchConditions"), problems)):
        at = f"/spec/matchConditions/{index}"
        item = _map(resource, at, item, problems, required=True)
        check = _check(resource, at + "/expression", item.get("expression"), declarations, problems, limits, "bool")
        if check is not None:
            conditions.append((str(item.get("name", index)), check))
    for index, item in enumerate(_list(resource, "/spec/variables", spec.get("variables"), problems)):
        at = f"/spec/variables/{index}"
        item = _map(resource, at, item, problems, required=True)
        known = Struct("variables", {n: c.expression.type if c.expression else DYN for n, c in variables.items()})
        offline = {n: c.offline for n, c in variables.items() if c.offline}
        check = _check(resource, at + "/expression", item.get("expression"),
                       dict(declarations, variables=known, offline=offline), problems, limits, None)
        if not isinstance(item.get("name"), str) or not item.get("name"):
            problems.add(resource, at + "/name" if "name" in item else at, "a variable's name is required (a string)")
        elif check is not None:
            variables[item["name"]] = check
    declarations["variables"] = Struct("variables", {n: c.expression.type if c.expression else DYN
                                                     for n, c in variables.items()})
    declarations["offline"] = {n: c.offline for n, c in variables.items() if c.offline}
    return conditions, variables


def _policy(resource: Resource, problems: _Problems, limits: Optional[Limits]) -> Optional[InTreePolicy]:
    name = _name(resource, problems)
    spec = _map(resource, "/spec", resource.obj.get("spec"), problems, required=True)
    failure = spec.get("failurePolicy", "Fail")
    if failure not in ("Fail", "Ignore"):
        problems.add(resource, "/spec/failurePolicy", f"must be Fail or Ignore, not {failure!r}")
    match = _map(resource, "/spec/matchConstraints", spec.get("matchConstraints"), problems, required=True)
    if isinstance(spec.get("matchConstraints"), dict):
        _rules(resource, "/spec/matchConstraints", match, problems, required=True)
    param_kind = _map(resource, "/spec/paramKind", spec.get("paramKind"), problems) or None
    declarations = dict(_BASE)
    if param_kind is None:
        del declarations["params"]  # as the API server compiles a policy without paramKind: undeclared
    conditions, variables = conditions_and_variables(resource, spec, declarations, problems, limits)
    validations = []
    for index, item in enumerate(_list(resource, "/spec/validations", spec.get("validations"), problems)):
        at = f"/spec/validations/{index}"
        item = _map(resource, at, item, problems, required=True)
        check = _check(resource, at + "/expression", item.get("expression"), declarations, problems, limits, "bool")
        message_expression = None
        if item.get("messageExpression") is not None:
            message_expression = _check(resource, at + "/messageExpression", item["messageExpression"],
                                        declarations, problems, limits, "string")
        if check is not None:
            validations.append(Validation(check, item.get("message"), message_expression,
                                          str(item.get("reason") or "Invalid")))
    annotations = []
    for index, item in enumerate(_list(resource, "/spec/auditAnnotations", spec.get("auditAnnotations"), problems)):
        at = f"/spec/auditAnnotations/{index}"
        item = _map(resource, at, item, problems, required=True)
        check = _check(resource, at + "/valueExpression", item.get("valueExpression"), declarations, problems,
                       limits, None)
        if check is not None:
            annotations.append((str(item.get("key")), check))
    if not spec.get("validations") and not spec.get("auditAnnotations"):
        problems.add(resource, "/spec", "validations or auditAnnotations must contain at least one item")
    if name is None or not match:
        return None
    return InTreePolicy(name, resource, failure, match, conditions, variables, validations, annotations, param_kind)


def ref_and_match(resource: Resource, spec: dict, problems: _Problems) -> tuple[Optional[dict], Optional[dict]]:
    """A binding's paramRef and matchResources, checked as the API server checks them (a VAP's binding and a
    MAP's alike; mapload.py)."""
    ref = _map(resource, "/spec/paramRef", spec.get("paramRef"), problems) or None
    if ref is not None:
        if ref.get("parameterNotFoundAction") not in ("Allow", "Deny"):
            problems.add(resource, "/spec/paramRef/parameterNotFoundAction", "must be Allow or Deny")
        if ("name" in ref) == ("selector" in ref):
            problems.add(resource, "/spec/paramRef", "exactly one of name or selector is required")
    match = _map(resource, "/spec/matchResources", spec.get("matchResources"), problems) or None
    if match is not None:
        _rules(resource, "/spec/matchResources", match, problems, required=False)
    return ref, match


def _binding(resource: Resource, problems: _Problems) -> Optional[InTreeBinding]:
    name = _name(resource, problems)
    spec = _map(resource, "/spec", resource.obj.get("spec"), problems, required=True)
    policy = spec.get("policyName")
    if not isinstance(policy, str) or not policy:
        problems.add(resource, "/spec/policyName" if spec else "/spec", "policyName is required")
        return None
    actions = _list(resource, "/spec/validationActions", spec.get("validationActions"), problems)
    if not actions:
        problems.add(resource, "/spec/validationActions", "at least one of Deny, Warn, Audit is required")
    for index, action in enumerate(actions):
        if action not in ACTIONS:
            problems.add(resource, f"/spec/validationActions/{index}", f"must be Deny, Warn or Audit, not {action!r}")
    if "Deny" in actions and "Warn" in actions:
        problems.add(resource, "/spec/validationActions", "Deny and Warn may not be used together")
    ref, match = ref_and_match(resource, spec, problems)
    if name is None or not actions or any(a not in ACTIONS for a in actions):
        return None
    return InTreeBinding(name, resource, policy, tuple(ACTIONS[a] for a in actions), match, ref)
