"""The engine: a compiled policy set evaluated against one resource at a time.

Evaluation does no parsing, no I/O and no compilation: policies were compiled
at load, the candidates for a (kind, classes) pair are computed once and
cached, and one CEL context per thread is refilled level by level (resource,
pod template, container) with only the variables some candidate rule reads.
A pod that is not an AI workload meets one policy (devices-declared) at most.
"""

from __future__ import annotations

import copy
import datetime as dt
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from . import pointer as jp
from .celenv import merge_usage, new_context
from .config import Config, ConfigError, load_config
from .facts import ClusterFacts, NoFacts
from .findings import Evaluation, Finding, Mutation
from .policy import ACTION_RANK, BUILTIN_POLICY_DIR, Policy, Rule, load_policies
from .resource import Resource
from .workload import Container, PodTemplate, ShapeError, Workload, build_workload

LEVEL_VARIABLES = {
    "object": frozenset({"object", "workload", "params", "cluster", "templates"}),
    "pod": frozenset({"pod", "podMeta", "template"}),
    "container": frozenset({"container", "containerType"}),
}


def project(value: Any, fields: Optional[frozenset]) -> Any:
    """The part of a bound object that the rules read (see celenv.field_usage): binding is the costly step."""
    if fields is None or not isinstance(value, dict):
        return value
    return {k: value[k] for k in fields if k in value}


def lower(action: str, ceiling: Optional[str]) -> str:
    if ceiling in ACTION_RANK and ACTION_RANK[ceiling] < ACTION_RANK[action]:
        return ceiling
    return action


@dataclass
class _Scope:
    """What one evaluation of one resource knows, shared by every policy of it."""

    resource: Resource
    workload: Optional[Workload]
    facts: ClusterFacts
    cluster: Optional[dict]
    ceiling: Optional[str]  # namespace enforcement label
    evaluation: Evaluation
    plan: Optional[dict] = None  # bound object -> fields to bind (None: whole)


class Engine:
    """A policy set plus its config, ready to evaluate and to mutate."""

    def __init__(self, policies: list[Policy], config: Optional[Config] = None):
        self.config = config or Config()
        self.policies = [p for p in policies if self.config.settings(p.id).enabled]
        self.by_id = {p.id: p for p in policies}
        unknown = sorted(set(self.config.policies) - set(self.by_id))
        if unknown:
            raise ConfigError([f"{self.config.source}: policies: unknown policy id {u!r}" for u in unknown])
        self._actions = {p.id: self.config.settings(p.id).action or p.action for p in self.policies}
        self._pod_rules = {p.id for p in self.policies if p.target == "container"
                           and any(r.target == "pod" for r in p.rules)}
        self._candidates: dict[tuple, tuple[Policy, ...]] = {}
        self._local = threading.local()
        self.generation = 0

    @classmethod
    def load(cls, policy_paths: Optional[Iterable[str]] = None, config_path: Optional[str] = None,
             own_namespace: Optional[str] = None) -> "Engine":
        config = load_config(config_path, own_namespace)
        policies = load_policies(list(policy_paths or [BUILTIN_POLICY_DIR]), config.params())
        return cls(policies, config)

    # ------------------------------------------------------------------ selection
    def candidates(self, kind: str, classes: frozenset) -> tuple[Policy, ...]:
        key = (kind, classes)
        found = self._candidates.get(key)
        if found is None:
            found = tuple(p for p in self.policies if self._class_match(p, kind, classes))
            self._candidates[key] = found
        return found

    @staticmethod
    def _class_match(policy: Policy, kind: str, classes: frozenset) -> bool:
        match = policy.match
        if match.kinds and kind not in match.kinds:
            return False
        if kind in match.exclude_kinds:
            return False
        if match.classes and not match.classes <= classes:
            return False
        if match.any_classes and not match.any_classes & classes:
            return False
        return bool(match.classes or match.any_classes or match.kinds)

    def _context(self):
        context = getattr(self._local, "context", None)
        if context is None:
            context = self._local.context = new_context()
        return context

    def _exempt(self, policy_id: str, resource: Resource, evaluation: Evaluation) -> bool:
        today = dt.date.today()
        for exception in self.config.exceptions:
            if exception.covers(policy_id, resource.namespace, resource.name, resource.kind):
                if exception.expired(today):
                    note = f"exception {exception.name!r} for {policy_id} expired on {exception.expires}"
                    if note not in evaluation.notes:
                        evaluation.notes.append(note)
                    continue
                return True
        if policy_id in self.config.annotation_exemptable:
            listed = str(resource.annotations.get(self.config.exemption_annotation, ""))
            if policy_id in {p.strip() for p in listed.split(",")}:
                return True
        return False

    def _scope(self, resource: Resource, facts: Optional[ClusterFacts]) -> tuple[_Scope, list[Policy]]:
        evaluation = Evaluation(resource)
        facts = facts or NoFacts()
        scope = _Scope(resource, None, facts, None, None, evaluation)
        if not isinstance(resource.obj, dict) or self.config.excluded(resource.namespace):
            return scope, []
        namespace_labels = facts.namespace_labels(resource.namespace) if resource.namespace else None
        try:
            scope.workload = build_workload(resource, self.config.classification, namespace_labels)
        except ShapeError as exc:
            evaluation.error_at(exc.pointer, exc.message)
            return scope, []
        classes = scope.workload.classes if scope.workload else frozenset()
        evaluation.classes = classes
        scope.ceiling = (namespace_labels or {}).get(self.config.enforcement_label)
        labels = resource.labels
        chosen = [p for p in self.candidates(resource.kind, classes)
                  if p.match.accepts(classes, resource.kind, resource.namespace, labels)
                  and not self._exempt(p.id, resource, evaluation)]
        evaluation.evaluated = bool(chosen) or scope.workload is not None
        evaluation.policies = tuple(p.id for p in chosen)
        return scope, chosen

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, resource: Resource, facts: Optional[ClusterFacts] = None) -> Evaluation:
        scope, chosen = self._scope(resource, facts)
        if not chosen:
            return scope.evaluation
        context = self._context()
        self._bind_resource(context, scope, chosen)
        by_target = {"object": [], "pod": [], "container": []}
        for policy in chosen:
            by_target[policy.target].append(policy)
            if policy.id in self._pod_rules:  # a container policy with rules about the whole pod
                by_target["pod"].append(policy)
        for policy in by_target["object"]:
            self._run(context, scope, policy, "", None, None)
        if scope.workload is not None and (by_target["pod"] or by_target["container"]):
            for template in scope.workload.templates:
                self._bind_template(context, scope, template)
                for policy in by_target["pod"]:
                    if template.spec is not None:
                        self._run(context, scope, policy, template.spec_pointer, template, None)
                for container in template.containers:
                    self._bind_container(context, scope, container)
                    for policy in by_target["container"]:
                        if policy.containers == "all" or policy.containers == container.section:
                            self._run(context, scope, policy, container.pointer, template, container)
        return scope.evaluation

    def _bind_resource(self, context, scope: _Scope, chosen: list[Policy], mutating: bool = False) -> None:
        variables = frozenset().union(*(p.variables for p in chosen))
        workload = scope.workload
        resource = scope.resource
        scope.plan = merge_usage(p.mutation_fields if mutating else p.fields for p in chosen)
        context.add_variable("workload", project({
            "kind": resource.kind,
            "name": resource.name,
            "namespace": resource.namespace,
            "labels": resource.labels,
            "annotations": resource.annotations,
            "classes": sorted(workload.classes) if workload else [],
            "role": (workload.role if workload else None) or "",
            "tier": (workload.tier if workload else None) or "",
            "devices": sorted(workload.devices) if workload else [],
            "podCount": workload.pod_count if workload else 0,
        }, scope.plan.get("workload", frozenset())))
        if "object" in variables:
            context.add_variable("object", project(resource.obj, scope.plan.get("object")))
        if "templates" in variables:
            # Every pod template, for rules about the whole workload (gang admission, spot checkpointing) or a
            # whole template (does any of its containers, KServe's `model` included, request a device?).
            context.add_variable("templates", [{
                "name": t.name, "podCount": t.pod_count, "hasPodSpec": t.spec is not None,
                "spec": t.spec if t.spec is not None else {}, "metadata": t.metadata,
                "containers": [c.obj for c in t.containers],
            } for t in (workload.templates if workload else [])])
        needed = frozenset(f for p in chosen for f in p.requires)
        if needed or "cluster" in variables:
            scope.cluster = self._cluster(scope, needed)
            context.add_variable("cluster", {k: v for k, v in scope.cluster.items() if v is not None})

    def _cluster(self, scope: _Scope, needed: frozenset) -> dict:
        facts, resource = scope.facts, scope.resource
        cluster: dict[str, Any] = {}
        if "namespace" in needed:
            labels = facts.namespace_labels(resource.namespace)
            cluster["namespace"] = None if labels is None else {"name": resource.namespace, "labels": labels}
        if "resourceQuotas" in needed:
            cluster["resourceQuotas"] = facts.resource_quotas(resource.namespace)
        if "priorityClasses" in needed:
            cluster["priorityClasses"] = facts.priority_classes()
        if "runtimeClasses" in needed:
            cluster["runtimeClasses"] = facts.runtime_classes()
        if "hpaTarget" in needed:
            cluster["hpaTarget"] = self._hpa_target(scope)
        return cluster

    def _hpa_target(self, scope: _Scope) -> Optional[dict]:
        ref = (scope.resource.obj.get("spec") or {}).get("scaleTargetRef") or {}
        if not isinstance(ref, dict):
            return None
        target = scope.facts.find(scope.resource.namespace, str(ref.get("kind", "")), str(ref.get("name", "")))
        if target is None:
            return None
        try:
            workload = build_workload(target, self.config.classification)
        except ShapeError:
            workload = None
        return {"kind": target.kind, "name": target.name,
                "classes": sorted(workload.classes) if workload else [],
                "devices": sorted(workload.devices) if workload else []}

    @staticmethod
    def _bind_template(context, scope: _Scope, template: PodTemplate) -> None:
        plan = scope.plan or {}
        if "pod" in plan:
            context.add_variable("pod", project(template.spec if template.spec is not None else {}, plan["pod"]))
        if "podMeta" in plan:
            context.add_variable("podMeta", project(template.metadata, plan["podMeta"]))
        context.add_variable("template", template.name)

    @staticmethod
    def _bind_container(context, scope: _Scope, container: Container) -> None:
        if "container" in (scope.plan or {}):
            context.add_variable("container", project(container.obj, scope.plan["container"]))
        context.add_variable("containerType", container.section)

    def _action(self, policy: Policy, rule: Rule, scope: _Scope) -> str:
        action = self._actions[policy.id]
        if rule.action:
            action = lower(action, rule.action)
        return lower(action, scope.ceiling)

    def _run(self, context, scope: _Scope, policy: Policy, base: str,
             template: Optional[PodTemplate], container: Optional[Container]) -> None:
        target = container.obj if container else (template.spec if template else scope.resource.obj)
        level = "container" if container else ("pod" if template else "object")
        for rule in policy.rules:
            if rule.target != level:
                continue
            if rule.needs_pod and (template is None or template.spec is None):
                continue
            # A `when` that reads no cluster fact decides first whether the rule applies at all, so unknown facts
            # make a rule skip only where it applies (a CPU-only template is not "skipped" by a GPU quota rule).
            early = rule.when is not None and "cluster" not in rule.when.variables
            if early:
                try:
                    if rule.when(context) is not True:
                        continue
                except Exception as exc:
                    self._add(scope, policy, rule, "error", f"rule could not be evaluated: {exc}",
                              _where(base, container, rule.path))
                    continue
            if rule.requires and self._unknown_facts(rule, scope):
                missing = [f for f in rule.requires if scope.cluster.get(f) is None]
                mode = self.config.settings(policy.id).context_failure or self.config.context_failure
                if rule.when_unknown == "ignore" or mode == "allow":
                    continue
                result = "fail" if mode == "deny" else "skip"
                self._add(scope, policy, rule, result,
                          f"{policy.id}/{rule.name} skipped: cluster facts unknown: {', '.join(missing)}"
                          if result == "skip" else f"cluster facts unavailable: {', '.join(missing)}",
                          _where(base, container, rule.path))
                continue
            try:
                if not early and rule.when is not None and rule.when(context) is not True:
                    continue
                if rule.expression is not None:
                    if rule.expression(context) is not True:
                        self._add(scope, policy, rule, "fail", rule.message.render(context),
                                  _where(base, container, rule.path))
                else:
                    for path, detail in rule.schema.errors(target):
                        context.add_variable("error", detail)
                        self._add(scope, policy, rule, "fail", rule.message.render(context),
                                  _where(base, container, jp.join("", *path)))
            except Exception as exc:  # a rule that cannot be evaluated fails closed, with the reason
                self._add(scope, policy, rule, "error", f"rule could not be evaluated: {exc}",
                          _where(base, container, rule.path))

    @staticmethod
    def _unknown_facts(rule: Rule, scope: _Scope) -> bool:
        return any((scope.cluster or {}).get(fact) is None for fact in rule.requires)

    def _add(self, scope: _Scope, policy: Policy, rule: Rule, result: str, message: str, pointer: str) -> None:
        scope.evaluation.findings.append(Finding(
            policy=policy.id, rule=rule.name, action=self._action(policy, rule, scope), result=result,
            message=message, resource=scope.resource, pointer=pointer))

    # ------------------------------------------------------------------ mutation
    def mutate(self, resource: Resource, facts: Optional[ClusterFacts] = None) -> Mutation:
        """JSON Patch that adds what the matching policies' mutations describe, where it is absent.

        Operations are applied to a working copy as they are made, so every later
        `when` sees the earlier ones: a second run on the result yields nothing.
        A policy lowered to `audit` (config or namespace label) observes only.
        """
        out = Mutation()
        working = copy.deepcopy(resource.obj)
        copy_resource = Resource(working, resource.origin)
        scope, chosen = self._scope(copy_resource, facts)
        chosen = [p for p in chosen if p.mutations and lower(self._actions[p.id], scope.ceiling) != "audit"]
        if not chosen or scope.workload is None:
            out.patched = working
            return out
        context = self._context()
        self._bind_resource(context, scope, chosen, mutating=True)
        for policy in chosen:
            for template in scope.workload.templates:
                if template.spec is None:
                    continue
                self._bind_template(context, scope, template)
                for mutation in policy.mutations:
                    if mutation.target == "pod":
                        if self._mutate_at(context, working, template.spec_pointer, mutation, out, policy.id):
                            self._bind_template(context, scope, template)  # later `when`s must see the change
                        continue
                    for container in template.containers:
                        if container.rename or policy.containers not in ("all", container.section):
                            continue
                        self._bind_container(context, scope, container)
                        if self._mutate_at(context, working, container.pointer, mutation, out, policy.id):
                            self._bind_template(context, scope, template)
        out.patched = working
        return out

    def _mutate_at(self, context, working: dict, base: str, mutation, out: Mutation, policy_id: str) -> bool:
        """Add one operation where `mutation` applies at `base`; True when something changed."""
        try:
            if mutation.when is not None and mutation.when(context) is not True:
                return False
            value = mutation.value(context)
        except Exception as exc:
            out.errors.append(f"{policy_id}/{mutation.name} at {base or '/'}: {exc}")
            return False
        path = base + mutation.path
        if mutation.op == "default":
            operation = _default_op(working, path, value)
        else:
            operation = _append_op(working, path, value)
        if operation is not None:
            _apply(working, operation)
            out.operations.append(operation)
            out.by_policy.setdefault(policy_id, []).append(operation)
            return True
        return False


def _where(base: str, container: Optional[Container], path: str) -> str:
    """Pointer of a finding: computed only for findings, never for passing rules."""
    return container.field_pointer(path) if container else base + path


def _default_op(document: dict, path: str, value: Any) -> Optional[dict]:
    """`add` of the first missing step of `path`, carrying the rest as nested maps; None if present."""
    tokens = jp.split(path)
    node = document
    for position, token in enumerate(tokens):
        if isinstance(node, list):  # an existing item on the way (a container, a Ray worker group)
            if not (token.isdigit() and int(token) < len(node)):
                return None
            node = node[int(token)]
            continue
        present = isinstance(node, dict) and node.get(token) is not None
        if not present:
            if not isinstance(node, dict):
                return None  # a list or scalar where a map belongs: not ours to rewrite
            nested = value
            for inner in reversed(tokens[position + 1:]):
                nested = {inner: nested}
            return {"op": "add", "path": jp.join("", *tokens[:position + 1]), "value": nested}
        node = node[token]
    return None


def _append_op(document: dict, path: str, value: Any) -> Optional[dict]:
    current = jp.resolve(document, path)
    if current is None:
        parent = jp.resolve(document, jp.join("", *jp.split(path)[:-1]))
        if not isinstance(parent, dict):
            return None
        return {"op": "add", "path": path, "value": [value]}
    if not isinstance(current, list):
        return None
    return {"op": "add", "path": path + "/-", "value": value}


def _apply(document: dict, operation: dict) -> None:
    tokens = jp.split(operation["path"])
    parent = document
    for token in tokens[:-1]:
        parent = parent[int(token)] if isinstance(parent, list) else parent[token]
    last = tokens[-1]
    value = copy.deepcopy(operation["value"])
    if isinstance(parent, list):
        parent.append(value) if last == "-" else parent.insert(int(last), value)
    else:
        parent[last] = value
