"""Running ValidatingAdmissionPolicies offline, as the API server's admission does on a CREATE (language/vapload.py).

Why its own module: a VAP is not an aiadmit policy (no levels, no templates walked by the engine): it reads the
whole object once per binding and param. The order is the API server's: the policy's matchConstraints, the
binding's matchResources, the param objects (paramRef, parameterNotFoundAction), matchConditions, then every
validation; an expression that errors is decided by the policy's failurePolicy (Fail: a violation at the binding's
actions; Ignore: nothing), and the messages are the API server's. What an offline run cannot know (a namespace the
input does not hold, `authorizer`, `request.userInfo`) is a `skip` finding with its reason, never a pass.
"""

from __future__ import annotations

from typing import Any, Optional

from webhook.cel.environment import Activation
from webhook.cel.values import Variables
from webhook.engine.deadline import check_deadline
from webhook.engine.vapequivalent import unmatched_reason
from webhook.k8s.defaults import defaulted
from webhook.k8s.selectors import selector_matches
from webhook.language.vapload import InTree, InTreeBinding, InTreePolicy
from webhook.model.facts import ClusterFacts
from webhook.model.findings import Finding
from webhook.model.resource import Resource

OPERATION = "CREATE"  # what an audit or a test of a manifest is; an admission review says its own


def operation(resource: Resource) -> str:
    return resource.origin.operation or OPERATION


def resource_of(kind: str) -> str:
    """The resource (plural) of a kind, as Kubernetes' RESTMapper guesses it (meta.UnsafeGuessKindToResource)."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


class Unknown(Exception):
    """What matching needs and the input does not hold: the binding is skipped with this reason."""


def _version(resource: Resource) -> str:
    return resource.api_version.rsplit("/", 1)[-1]


def _rule_matches(rule: dict, resource: Resource) -> bool:
    def has(field: str, value: str) -> bool:
        values = rule.get(field) or []
        return "*" in values or value in values
    if not (has("apiGroups", resource.group) and has("apiVersions", _version(resource))
            and has("operations", operation(resource))):
        return False
    names = rule.get("resourceNames") or []
    if names and resource.name not in names:
        return False
    scope = rule.get("scope", "*")
    if scope == "Namespaced" and not resource.namespace or scope == "Cluster" and resource.namespace:
        return False
    plural = resource_of(resource.kind)
    return any(r in ("*", plural, f"{plural}/*") for r in rule.get("resources") or [])


def _namespace_labels(resource: Resource, facts: ClusterFacts) -> Optional[dict]:
    if resource.kind == "Namespace" and resource.group == "":
        return resource.labels
    if not resource.namespace:
        return None  # cluster-scoped: a namespaceSelector does not apply
    labels = facts.namespace_labels(resource.namespace)
    if labels is None:
        raise Unknown(f"namespace {resource.namespace!r} is not in the input, so its labels for the "
                      f"namespaceSelector are unknown")
    return labels


def matches(constraints: Optional[dict], resource: Resource, facts: ClusterFacts) -> bool:
    """matchConstraints or matchResources: resource rules less excluded ones, then both selectors."""
    if not constraints:
        return True
    rules = constraints.get("resourceRules")
    if rules is not None and not any(_rule_matches(rule, resource) for rule in rules):
        reason = unmatched_reason(constraints, rules, resource, _rule_matches)
        if reason is not None:
            raise Unknown(reason)
        return False
    excluded = constraints.get("excludeResourceRules") or []
    if any(_rule_matches(rule, resource) for rule in excluded):
        return False
    reason = unmatched_reason(constraints, excluded, resource, _rule_matches)  # excluded in another version?
    if reason is not None:
        raise Unknown(f"excludeResourceRules: {reason}")
    if not selector_matches(constraints.get("objectSelector") or {}, resource.labels):
        return False
    selector = constraints.get("namespaceSelector") or {}
    if selector.get("matchLabels") or selector.get("matchExpressions"):
        labels = _namespace_labels(resource, facts)
        if labels is not None and not selector_matches(selector, labels):
            return False
    return True


def _params(policy, binding, resource: Resource, intree: InTree) -> Optional[list]:
    """The param objects to evaluate with ([None] without paramKind); None: none found, decided by the binding.
    A VAP's and a MAP's policy and binding alike (mapeval.py): both have `param_kind` and `param_ref`."""
    if policy.param_kind is None:
        return [None]
    ref = binding.param_ref
    if ref is None:
        return None
    kind = (policy.param_kind.get("apiVersion"), policy.param_kind.get("kind"))
    namespace = ref.get("namespace", resource.namespace)
    found = []
    for param in intree.params:
        if (param.api_version, param.kind) != kind or param.namespace not in (namespace, ""):
            continue
        if "name" in ref and param.name == ref["name"] or "selector" in ref and selector_matches(
                ref["selector"] or {}, param.labels):
            found.append(param.obj)
    return found or None


def _request(resource: Resource) -> dict:
    return {"operation": operation(resource), "name": resource.name, "namespace": resource.namespace, "dryRun": False,
            "kind": {"group": resource.group, "version": _version(resource), "kind": resource.kind},
            "resource": {"group": resource.group, "version": _version(resource),
                         "resource": resource_of(resource.kind)},
            "options": {"apiVersion": "meta.k8s.io/v1",
                        "kind": "CreateOptions" if operation(resource) == OPERATION else "UpdateOptions"}}


def _namespace_object(resource: Resource, facts: ClusterFacts) -> Optional[dict]:
    if not resource.namespace:
        return None
    labels = facts.namespace_labels(resource.namespace)
    if labels is None:
        return None
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": resource.namespace, "labels": labels}}


def evaluate(intree: InTree, resource: Resource, facts: ClusterFacts,
             deadline: Optional[float] = None) -> tuple[list[Finding], list[str]]:
    """The findings of every binding of the in-tree set on `resource`, created as it is, and the policies a binding
    matched it to (then it was checked by them, even if nothing was found). `deadline` (time.monotonic()) is checked
    before each binding and each param object, as the engine checks it between its own policies."""
    findings: list[Finding] = []
    matched: list[str] = []
    obj = None  # the object as the API server defaults it, made for the first binding that matches
    for binding in intree.bindings:
        check_deadline(deadline)
        policy = intree.policies.get(binding.policy)
        if policy is None:
            continue
        out = _Run(policy, binding, resource, findings)
        try:
            if not matches(policy.match, resource, facts) or not matches(binding.match, resource, facts):
                continue
        except Unknown as exc:
            out.add("skip", f"skipped: {exc}", "match")
            continue
        if policy.name not in matched:
            matched.append(policy.name)
        params = _params(policy, binding, resource, intree)
        if params is None:
            if binding.param_ref is not None and binding.param_ref.get("parameterNotFoundAction") == "Allow":
                continue
            out.deny("failed to configure binding: no params found for policy binding with `Deny` "
                     "parameterNotFoundAction", "paramRef")
            continue
        if obj is None:
            obj = defaulted(resource.obj, resource.group, resource.kind)
        for param in params:
            check_deadline(deadline)
            out.run(obj, param, _namespace_object(resource, facts))
    return findings, matched


class _Run:
    """One binding of one policy on one object: the findings it adds, with the API server's messages."""

    def __init__(self, policy: InTreePolicy, binding: InTreeBinding, resource: Resource, findings: list):
        self.policy, self.binding, self.resource, self.findings = policy, binding, resource, findings

    def add(self, result: str, message: str, rule: str, actions: Optional[tuple] = None) -> None:
        for action in actions or self.binding.actions:
            self.findings.append(Finding(policy=self.policy.name, rule=f"{self.binding.name}/{rule}", action=action,
                                         result=result, message=message, resource=self.resource, pointer=""))

    def deny(self, message: str, rule: str, result: str = "fail") -> None:
        """A violation, worded as the API server words it for each action (denied / warning / audit)."""
        for action in self.binding.actions:
            if action == "deny":
                text = (f"ValidatingAdmissionPolicy '{self.policy.name}' with binding '{self.binding.name}' "
                        f"denied request: {message}")
            else:
                text = (f"Validation failed for ValidatingAdmissionPolicy '{self.policy.name}' with binding "
                        f"'{self.binding.name}': {message}")
            self.add(result, text, rule, (action,))

    def failed(self, check, exc: Exception, rule: str) -> None:
        """An expression that errors: failurePolicy decides (Fail: a violation; Ignore: nothing)."""
        if self.policy.failure_policy == "Ignore":
            return
        self.deny(f"expression '{check.source}' resulted in error: {exc}", rule, "error")

    def value(self, check, context: Activation, rule: str) -> tuple[bool, Any]:
        if check.offline is not None:
            self.add("skip", f"skipped: {rule} {check.offline}", rule)
            return False, None
        try:
            return True, check.expression.run(context)
        except Exception as exc:  # noqa: BLE001 - an expression error is the failurePolicy's to decide
            self.failed(check, exc, rule)
            return False, None

    def run(self, obj: Any, param: Any, namespace_object: Optional[dict]) -> None:
        old = self.resource.origin.old_object
        context = Activation(object=obj, oldObject=old, request=_request(self.resource),
                             params=param, namespaceObject=namespace_object, authorizer=None)
        context["variables"] = Variables({name: check.expression for name, check in self.policy.variables.items()
                                          if check.expression is not None}, context)
        for name, check in self.policy.conditions:
            ok, value = self.value(check, context, f"matchConditions[{name}]")
            if not ok or value is not True:
                return  # false: not matched; an error: decided already
        for index, validation in enumerate(self.policy.validations):
            rule = f"validations[{index}]"
            ok, value = self.value(validation.check, context, rule)
            if not ok or value is True:
                continue
            self.deny(self._message(validation, context), rule)
        for key, check in self.policy.annotations:
            ok, value = self.value(check, context, f"auditAnnotations[{key}]")
            if ok and value is not None:
                self.findings.append(Finding(
                    policy=self.policy.name, rule=f"{self.binding.name}/auditAnnotations[{key}]", action="audit",
                    result="fail", message=f"audit annotation {self.policy.name}/{key}: {value}",
                    resource=self.resource, pointer=""))

    def _message(self, validation, context: Activation) -> str:
        if validation.message_expression is not None:
            try:
                text = validation.message_expression.expression.run(context)
            except Exception:  # noqa: BLE001 - the API server falls back to the static message
                text = None
            if isinstance(text, str) and text.strip() and "\n" not in text:
                return text.strip()
        if validation.message:
            return validation.message
        return f"failed expression: {validation.check.source}"
