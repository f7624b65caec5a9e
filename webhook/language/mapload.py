"""MutatingAdmissionPolicy and its Binding (admissionregistration.k8s.io/v1) read as policies: any MAP, offline.

Why beside vapload.py and not in it: the shape differs where it matters (mutations instead of validations, no
validationActions, reinvocationPolicy), the checks and the environment are the same, and are vapload's: every
expression type-checked where the API server checks it at create (kube-apiserver v1.37.2), each problem at
file:line:col. A mutation's expression also sees the MAP's message types (`JSONPatch{...}`, `Object{...}`:
cel/messages.py) and must give what its patchType takes: a list of JSONPatch, or an Object. The evaluation is
engine/mapeval.py.
"""

from __future__ import annotations

from typing import Optional

from webhook.cel.constants import Struct
from webhook.cel.limits import Limits
from webhook.cel.messages import JSONPATCH, MESSAGES, OBJECT, type_text as show
from webhook.language import vapload
from webhook.language.vapload import Check, _check, _list, _map, _name, _Problems, _rules
from webhook.model.resource import Resource

POLICY, BINDING = "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"
KINDS = (POLICY, BINDING)
PATCH_TYPES = {"JSONPatch": "jsonPatch", "ApplyConfiguration": "applyConfiguration"}
REINVOCATION = ("Never", "IfNeeded")
OPERATIONS = ("*", "CREATE", "UPDATE", "CONNECT")  # a MAP never sees a DELETE: the API server refuses the rule
_FIELDS = {"spec": ("paramKind", "matchConstraints", "variables", "mutations", "failurePolicy", "matchConditions",
                    "reinvocationPolicy"),
           "mutation": ("patchType", "jsonPatch", "applyConfiguration"),
           "binding": ("policyName", "paramRef", "matchResources")}


def _unknown(resource: Resource, at: str, value: dict, known: str, problems: _Problems, kind: str) -> None:
    """A field the type does not have: the API server's strict decoding refuses the object."""
    for name in value:
        if name not in _FIELDS[known]:
            problems.add(resource, f"{at}/{name}", f"strict decoding error: unknown field {name!r} in a {kind}")


class Mutation:
    patch_type: str  # JSONPatch | ApplyConfiguration
    check: Check
    index: int

    def __init__(self, patch_type: str, check: Check, index: int) -> None:
        self.patch_type = patch_type
        self.check = check
        self.index = index


class MutatingPolicy:
    name: str
    resource: Resource
    failure_policy: str  # Fail | Ignore
    match: dict
    conditions: list  # (name, Check)
    variables: dict  # name -> Check, in order
    mutations: list  # Mutation
    param_kind: Optional[dict]
    reinvocation: str  # Never | IfNeeded

    def __init__(self, name: str, resource: Resource, failure_policy: str, match: dict, conditions: list,
                 variables: dict, mutations: list, param_kind: Optional[dict], reinvocation: str) -> None:
        self.name = name
        self.resource = resource
        self.failure_policy = failure_policy
        self.match = match
        self.conditions = conditions
        self.variables = variables
        self.mutations = mutations
        self.param_kind = param_kind
        self.reinvocation = reinvocation


class MutatingBinding:
    name: str
    resource: Resource
    policy: str
    match: Optional[dict]
    param_ref: Optional[dict]

    def __init__(self, name: str, resource: Resource, policy: str, match: Optional[dict],
                 param_ref: Optional[dict]) -> None:
        self.name = name
        self.resource = resource
        self.policy = policy
        self.match = match
        self.param_ref = param_ref


def _result(kind, patch_type: str) -> Optional[str]:
    """What is wrong with a mutation expression's type, in the API server's words; None if fine. Exactly
    list(JSONPatch) or Object: a dyn, a list(dyn) (`[]`) and an Object.spec are refused, as it refuses them."""
    if patch_type == "JSONPatch":
        if isinstance(kind, tuple) and kind[0] == "list" and getattr(kind[1], "name", None) == JSONPATCH:
            return None
        return f"must evaluate to list(JSONPatch) but got {show(kind)}"
    if isinstance(kind, Struct) and kind.name == OBJECT:
        return None
    return f"must evaluate to Object but got {show(kind)}"


def read(resources: list, found, problems: _Problems, limits: Optional[Limits]) -> None:
    """The MAPs and their bindings among `resources`, into `found` (vapload.InTree's `mutating`,
    `mutating_bindings`)."""
    for resource in resources:
        if resource.kind == POLICY:
            policy = _policy(resource, problems, limits)
            if policy is None:
                continue
            if policy.name in found.mutating:
                problems.add(resource, "/metadata/name", f"{POLICY} {policy.name!r} is given twice")
                continue
            found.mutating[policy.name] = policy
        elif resource.kind == BINDING:
            binding = _binding(resource, problems)
            if binding is not None:
                found.mutating_bindings.append(binding)
    for binding in found.mutating_bindings:
        if binding.policy not in found.mutating:
            problems.add(binding.resource, "/spec/policyName", f"no {POLICY} named {binding.policy!r} is given")


def _policy(resource: Resource, problems: _Problems, limits: Optional[Limits]) -> Optional[MutatingPolicy]:
    name = _name(resource, problems)
    spec = _map(resource, "/spec", resource.obj.get("spec"), problems, required=True)
    failure = spec.get("failurePolicy", "Fail")
    if failure not in ("Fail", "Ignore"):
        problems.add(resource, "/spec/failurePolicy", f"must be Fail or Ignore, not {failure!r}")
    reinvocation = spec.get("reinvocationPolicy")
    if reinvocation not in REINVOCATION:
        problems.add(resource, "/spec/reinvocationPolicy" if "reinvocationPolicy" in spec else "/spec",
                     "reinvocationPolicy must be Never or IfNeeded" if reinvocation is not None
                     else "reinvocationPolicy is required (Never or IfNeeded)")
    _unknown(resource, "/spec", spec, "spec", problems, POLICY)
    match = _map(resource, "/spec/matchConstraints", spec.get("matchConstraints"), problems, required=True)
    if isinstance(spec.get("matchConstraints"), dict):
        _rules(resource, "/spec/matchConstraints", match, problems, required=True)
        _operations(resource, "/spec/matchConstraints", match, problems)
    param_kind = _map(resource, "/spec/paramKind", spec.get("paramKind"), problems) or None
    declarations = dict(vapload._BASE)
    if param_kind is None:
        del declarations["params"]
    conditions, variables = vapload.conditions_and_variables(resource, spec, declarations, problems, limits)
    declarations[MESSAGES] = True  # JSONPatch{...} and Object{...}: in the mutations only (cel/messages.py)
    mutations = []
    items = _list(resource, "/spec/mutations", spec.get("mutations"), problems)
    if not items and isinstance(spec.get("mutations", []), list):
        problems.add(resource, "/spec/mutations" if "mutations" in spec else "/spec",
                     "mutations must contain at least one item")
    for index, item in enumerate(items):
        mutation = _mutation(resource, f"/spec/mutations/{index}", item, index, declarations, problems, limits)
        if mutation is not None:
            mutations.append(mutation)
    if name is None or not match or len(mutations) != len(items):
        return None
    return MutatingPolicy(name, resource, failure, match, conditions, variables, mutations, param_kind,
                          reinvocation if reinvocation in REINVOCATION else "Never")


def _mutation(resource: Resource, at: str, item, index: int, declarations: dict, problems: _Problems,
              limits: Optional[Limits]) -> Optional[Mutation]:
    item = _map(resource, at, item, problems, required=True)
    _unknown(resource, at, item, "mutation", problems, POLICY)
    patch_type = item.get("patchType")
    if patch_type not in PATCH_TYPES:
        problems.add(resource, f"{at}/patchType" if "patchType" in item else at,
                     "patchType must be JSONPatch or ApplyConfiguration" if patch_type is not None
                     else "patchType is required (JSONPatch or ApplyConfiguration)")
        return None
    field = PATCH_TYPES[patch_type]
    for other in PATCH_TYPES.values():
        if other != field and other in item:
            problems.add(resource, f"{at}/{other}", f"must not be set when patchType is {patch_type}")
    body = item.get(field)
    if not isinstance(body, dict):
        problems.add(resource, f"{at}/{field}" if field in item else at, f"{field} is required when patchType is "
                     f"{patch_type}" if body is None else "must be a map")
        return None
    pointer = f"{at}/{field}/expression"
    check = _check(resource, pointer, body.get("expression"), declarations, problems, limits, None)
    if check is None:
        return None
    if check.expression is not None:
        wrong = _result(check.expression.type, patch_type)
        if wrong is not None:
            problems.add(resource, pointer, wrong)
            return None
    return Mutation(patch_type, check, index)


def _operations(resource: Resource, at: str, match: dict, problems: _Problems) -> None:
    for field in ("resourceRules", "excludeResourceRules"):
        for index, rule in enumerate(match.get(field) or []):
            operations = rule.get("operations") if isinstance(rule, dict) else None
            for position, operation in enumerate(operations if isinstance(operations, list) else []):
                if operation not in OPERATIONS:
                    problems.add(resource, f"{at}/{field}/{index}/operations/{position}",
                                 f"unsupported value {operation!r}: supported values: {', '.join(OPERATIONS)}")


def _binding(resource: Resource, problems: _Problems) -> Optional[MutatingBinding]:
    name = _name(resource, problems)
    spec = _map(resource, "/spec", resource.obj.get("spec"), problems, required=True)
    policy = spec.get("policyName")
    if not isinstance(policy, str) or not policy:
        problems.add(resource, "/spec/policyName" if spec else "/spec", "policyName is required")
        return None
    _unknown(resource, "/spec", spec, "binding", problems, BINDING)
    ref, match = vapload.ref_and_match(resource, spec, problems)
    if match is not None:
        _operations(resource, "/spec/matchResources", match, problems)
    if name is None:
        return None
    return MutatingBinding(name, resource, policy, match, ref)
