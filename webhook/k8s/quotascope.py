"""Does a ResourceQuota count a pod? Kubernetes' quota scope matching, for the `gpu-quota` policy.

A quota with `scopes` or a `scopeSelector` only charges the pods its scopes
select; a pod outside all of them is not bounded by it at all. Written as one
CEL function (`quotaSelects(quota, pod, container)`) because the rules are a
dozen cases that read badly as nested CEL ternaries. The semantics follow the
API server's quota evaluator for pods (`podMatchesScopeFunc` in
pkg/quota/v1/evaluator/core/pods.go):

- every scope in `spec.scopes` (operator Exists) and every expression of
  `spec.scopeSelector.matchExpressions` must select the pod (they are ANDed);
- PriorityClass: a label selector over {"PriorityClass": priorityClassName},
  the key being absent when the pod names no class (so `DoesNotExist` and
  `NotIn` select class-less pods, `In` never does); `Exists` needs a class;
- Terminating / NotTerminating: `activeDeadlineSeconds` set (>= 0) or not;
- BestEffort / NotBestEffort: the pod's QoS class, which only cpu and memory
  requests and limits decide;
- CrossNamespacePodAffinity: a pod (anti-)affinity term naming namespaces or
  a namespace selector;
- any other scope selects nothing.
"""

from __future__ import annotations

from typing import Any


def _items(value: Any) -> list:
    return value if isinstance(value, list) else []


def _map(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _best_effort(pod: dict, container: dict) -> bool:
    containers = _items(pod.get("containers")) + _items(pod.get("initContainers"))
    if container and not any(c is container or c == container for c in containers):
        containers.append(container)  # a container kept outside the lists (KServe's `model`)
    for item in containers:
        resources = _map(_map(item).get("resources"))
        for section in ("requests", "limits"):
            values = _map(resources.get(section))
            if "cpu" in values or "memory" in values:
                return False
    return True


def _cross_namespace_affinity(pod: dict) -> bool:
    affinity = _map(pod.get("affinity"))
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = _map(affinity.get(kind))
        required = _items(terms.get("requiredDuringSchedulingIgnoredDuringExecution"))
        preferred = [_map(w).get("podAffinityTerm") for w in
                     _items(terms.get("preferredDuringSchedulingIgnoredDuringExecution"))]
        for term in required + preferred:
            term = _map(term)
            if _items(term.get("namespaces")) or term.get("namespaceSelector") is not None:
                return True
    return False


def _priority_class_matches(operator: str, values: list, name: str) -> bool:
    if operator == "Exists":
        return name != ""
    if operator == "DoesNotExist":
        return name == ""
    if operator == "In":
        return name != "" and name in values
    if operator == "NotIn":
        return not (name != "" and name in values)
    return False


def scope_selects(scope: str, operator: str, values: list, pod: dict, container: dict) -> bool:
    """One scope requirement against one pod."""
    if scope == "PriorityClass":
        return _priority_class_matches(operator, values, str(pod.get("priorityClassName") or ""))
    if scope in ("Terminating", "NotTerminating"):
        deadline = pod.get("activeDeadlineSeconds")
        terminating = isinstance(deadline, (int, float)) and not isinstance(deadline, bool) and deadline >= 0
        return terminating if scope == "Terminating" else not terminating
    if scope in ("BestEffort", "NotBestEffort"):
        best_effort = _best_effort(pod, container)
        return best_effort if scope == "BestEffort" else not best_effort
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(pod)
    return False


def quota_selects(quota: Any, pod: Any, container: Any = None) -> bool:
    """True when `quota` (a ResourceQuota object) charges `pod` (a pod spec), as the API server decides."""
    spec = _map(_map(quota).get("spec"))
    pod, container = _map(pod), _map(container)
    requirements = [(str(s), "Exists", []) for s in _items(spec.get("scopes"))]
    for expression in _items(_map(spec.get("scopeSelector")).get("matchExpressions")):
        expression = _map(expression)
        requirements.append((str(expression.get("scopeName", "")), str(expression.get("operator", "")),
                             [str(v) for v in _items(expression.get("values"))]))
    return all(scope_selects(scope, operator, values, pod, container) for scope, operator, values in requirements)
