"""The engine: a compiled policy set evaluated against one resource at a time.

Evaluation does no parsing and no I/O: policies were checked at load, each CEL
program is compiled into a Python function once (webhook/cel/compiler.py; at its
first run, or all at once by `prepare()` in the webhook), and the candidates for
a (kind, classes) pair are computed once and cached. The variables rules
read are the decoded objects themselves, bound by reference in a dict: the
resource-wide ones (`workload`, `object`, `templates`, `cluster`) once, `pod`
and `container` as the engine walks the templates. A pod that is not an AI
workload meets one policy (devices-declared) at most.
"""

from __future__ import annotations

import copy
import datetime as dt
import time
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from webhook.model import pointer as jp
from webhook.cel.environment import Activation, new_context
from webhook.language.config import Config, ConfigError, load_config
from webhook.model.facts import ClusterFacts, NoFacts
from webhook.model.findings import Evaluation, Finding, Mutation
from webhook.language.policy import ACTION_RANK, BUILTIN_POLICY_DIR, Policy, Rule, load_policies
from webhook.model.resource import Resource
from webhook.k8s.workload import (Container, PodTemplate, ShapeError, Workload, build_workload, kind_table,
                       template_devices)


class BudgetExceeded(Exception):
    """The caller's deadline passed; raised between two policies (a CEL program is never interrupted)."""


def _check(deadline: Optional[float]) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise BudgetExceeded()


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
    variables: frozenset = frozenset()  # CEL variables some chosen policy reads
    chosen: tuple = ()
    bound: bool = False  # CEL variables are bound on the first rule that needs CEL, not before
    devices: Optional[dict] = None  # template position -> its devices, when some rule reads templateDevices
    unreadable: tuple = ()  # pointers of fields reported as input errors: no finding of their own on them


@dataclass(frozen=True)
class _Plan:
    """What one policy runs at one level (object, pod, container) for resources of given classes, decided once.

    `rules` may apply there; `guarded`: some of them start with a has() test the engine makes in Python first.
    When all of them are active, `simple` are those one verdict program (`verdicts`) answers and `rest` the ones
    that run alone (they read cluster facts, or are JSON Schema rules).
    """

    rules: tuple
    guarded: bool
    simple: tuple
    verdicts: Optional[Any]
    rest: tuple

    @classmethod
    def of(cls, policy: Policy, level: str, classes: frozenset, has_spec: bool) -> "_Plan":
        rules = tuple(rule for rule in policy.rules
                      if rule.target == level and not (rule.classes and not rule.classes <= classes)
                      and not (rule.needs_pod and not has_spec))
        simple = tuple(rule for rule in rules if rule.expression is not None and not rule.requires)
        return cls(rules=rules, guarded=any(rule.presence for rule in rules), simple=simple,
                   verdicts=policy.verdicts(simple) if simple else None,
                   rest=tuple(rule for rule in rules if rule.expression is None or rule.requires))


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
        self._exception_index: dict[tuple, tuple] = {}
        self._plans: dict[tuple, _Plan] = {}  # (policy, level, classes, has pod spec) -> what runs there
        self.generation = 0
        kind_table()  # read now, so that forked workers and every review share the one table

    @classmethod
    def load(cls, policy_paths: Optional[Iterable[str]] = None, config_path: Optional[str] = None,
             own_namespace: Optional[str] = None) -> "Engine":
        config = load_config(config_path, own_namespace)
        policies = load_policies(list(policy_paths or [BUILTIN_POLICY_DIR]), config.params())
        return cls(policies, config)

    def prepare(self) -> "Engine":
        """Compile every CEL program now rather than at its first run (the webhook, before it serves a review).

        A one-shot audit leaves programs to compile on first use, since most never
        run; a server would otherwise charge the compiling to its first reviews.
        Each policy's combined verdict program is built for its full rule set per
        level, the set a resource that passes every guard meets.
        """
        for policy in self.policies:
            expressions = policy.expressions()
            for level in ("object", "pod", "container"):
                simple = tuple(r for r in policy.rules
                               if r.target == level and r.expression is not None and not r.requires)
                if simple:
                    expressions.append(policy.verdicts(simple))
            for expression in expressions:
                expression.program  # noqa: B018 - compiles and keeps it
        return self

    # ------------------------------------------------------------------ selection
    def candidates(self, kind: str, classes: frozenset) -> tuple[Policy, ...]:
        key = (kind, classes)
        found = self._candidates.get(key)
        if found is None:
            found = tuple(p for p in self.policies if p.match.admits(kind, classes))
            self._candidates[key] = found
        return found

    def _exceptions_for(self, policy_id: str, namespace: str) -> tuple:
        """The config exceptions that can cover this policy in this namespace (memoised: few namespaces)."""
        key = (policy_id, namespace)
        found = self._exception_index.get(key)
        if found is None:
            found = tuple(e for e in self.config.exceptions if e.covers_namespace(policy_id, namespace))
            if len(self._exception_index) < 65536:
                self._exception_index[key] = found
        return found

    def _exempt(self, policy_id: str, resource: Resource, evaluation: Evaluation) -> bool:
        exceptions = self._exceptions_for(policy_id, resource.namespace)
        if exceptions:
            today = dt.date.today()
            for exception in exceptions:
                if not exception.covers(policy_id, resource.namespace, resource.name, resource.kind):
                    continue
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
        if scope.workload is not None and scope.workload.errors:  # one bad field: its error, and the rest checked
            for error in scope.workload.errors:
                evaluation.error_at(error.pointer, error.message)
            scope.unreadable = tuple(error.pointer for error in scope.workload.errors)
        if scope.workload is not None and scope.workload.unlisted:
            evaluation.notes.append(f"{resource.describe()} ({resource.origin.file or resource.api_version}): "
                                    f"{scope.workload.unlisted} is not in the kinds table; checked the "
                                    f"{len(scope.workload.templates)} pod template(s) found by shape")
        classes = scope.workload.classes if scope.workload else frozenset()
        evaluation.classes = classes
        scope.ceiling = (namespace_labels or {}).get(self.config.enforcement_label)
        labels = resource.labels
        chosen = [p for p in self.candidates(resource.kind, classes)
                  if p.match.admits_place(resource.namespace, labels)
                  and not self._exempt(p.id, resource, evaluation)]
        evaluation.evaluated = bool(chosen) or scope.workload is not None
        evaluation.policies = tuple(p.id for p in chosen)
        return scope, chosen

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, resource: Resource, facts: Optional[ClusterFacts] = None,
                 deadline: Optional[float] = None) -> Evaluation:
        """Findings of every matching policy. `deadline` (time.monotonic()) raises BudgetExceeded between policies."""
        scope, chosen = self._scope(resource, facts)
        if not chosen:
            return scope.evaluation
        context = new_context()
        scope.chosen = tuple(chosen)
        by_target = {"object": [], "pod": [], "container": []}
        for policy in chosen:
            by_target[policy.target].append(policy)
            if policy.id in self._pod_rules:  # a container policy with rules about the whole pod
                by_target["pod"].append(policy)
        for policy in by_target["object"]:
            _check(deadline)
            self._run(context, scope, policy, "", None, None)
        if scope.workload is not None and (by_target["pod"] or by_target["container"]):
            for position, template in enumerate(scope.workload.templates):
                for policy in by_target["pod"]:
                    if template.spec is not None:
                        _check(deadline)
                        self._run(context, scope, policy, template.spec_pointer, template, None, position)
                for container in template.containers:
                    for policy in by_target["container"]:
                        if policy.takes(container):
                            _check(deadline)
                            self._run(context, scope, policy, container.pointer, template, container, position)
        return scope.evaluation

    def _bind_resource(self, context: Activation, scope: _Scope, chosen: list[Policy]) -> None:
        """Bind the resource-wide variables the chosen policies read, and the cluster facts they need."""
        scope.variables = frozenset().union(*(p.variables for p in chosen))
        needed = frozenset(f for p in chosen for f in p.requires)
        if needed or "cluster" in scope.variables:
            scope.cluster = self._cluster(scope, needed)
        # By reference: a mutation applied to the resource is seen by every later rule without binding again.
        variables = scope.variables
        resource, workload = scope.resource, scope.workload
        templates = workload.templates if workload else []
        if "workload" in variables:
            context["workload"] = {
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
            }
        if "object" in variables:
            context["object"] = resource.obj
        if "cluster" in variables and scope.cluster is not None:
            context["cluster"] = {k: v for k, v in scope.cluster.items() if v is not None}
        if "templates" in variables:
            # Every pod template, for rules about the whole workload (gang admission, spot checkpointing).
            context["templates"] = [{
                "name": t.name, "podCount": t.pod_count, "hasPodSpec": t.spec is not None,
                "spec": t.spec if t.spec is not None else {}, "metadata": t.metadata,
                "containers": [c.obj for c in t.containers],
            } for t in templates]

    def _enter(self, context: Activation, scope: _Scope, template: Optional[PodTemplate], position: Optional[int],
               container: Optional[Container]) -> None:
        """Bind the pod template and container a rule is about to run on."""
        if template is not None:
            context["pod"] = template.spec if template.spec is not None else {}
            context["podMeta"] = template.metadata
            context["template"] = template.name
            if "templateDevices" in scope.variables:
                if scope.devices is None:
                    scope.devices = {}
                if position not in scope.devices:
                    scope.devices[position] = template_devices(template, self.config.classification)
                context["templateDevices"] = scope.devices[position]
        if container is not None:
            context["container"] = container.obj
            context["containerType"] = container.section
            context["containerName"] = container.name  # its name, else its field or place: never "?"
            context["injected"] = container.injected  # what the kind's operator mounts in it (kinds.yaml)
        elif "container" in context:  # a pod-level rule must not see the last template's container
            del context["container"], context["containerType"], context["containerName"], context["injected"]

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
        # KEDA's ScaledObject may leave the kind out: it then scales an apps/v1 Deployment (KEDA's default).
        default = "Deployment" if scope.resource.kind == "ScaledObject" else ""
        target = scope.facts.find(scope.resource.namespace, str(ref.get("kind") or default), str(ref.get("name", "")))
        if target is None:
            return None
        try:
            workload = build_workload(target, self.config.classification)
        except ShapeError:
            workload = None
        return {"kind": target.kind, "name": target.name,
                "classes": sorted(workload.classes) if workload else [],
                "devices": sorted(workload.devices) if workload else []}

    def _action(self, policy: Policy, rule: Rule, scope: _Scope) -> str:
        action = self._actions[policy.id]
        if rule.action:
            action = lower(action, rule.action)
        return lower(action, scope.ceiling)

    def _run(self, context: Activation, scope: _Scope, policy: Policy, base: str, template: Optional[PodTemplate],
             container: Optional[Container], position: Optional[int] = None) -> None:
        target = container.obj if container else (template.spec if template else scope.resource.obj)
        key = (policy.id, "container" if container else ("pod" if template else "object"), scope.evaluation.classes,
               template is not None and template.spec is not None)
        plan = self._plans.get(key)
        if plan is None:  # what does not depend on the object's fields: the same for every resource of its classes
            plan = self._plans[key] = _Plan.of(policy, *key[1:])
        if plan.guarded:  # a `when` that starts with has() of an absent field is false: no CEL at all
            obj = scope.resource.obj
            active = [rule for rule in plan.rules
                      if not (rule.presence and not _present(rule.presence, obj, template, container))]
            if len(active) == len(plan.rules):
                active, simple, verdict_program, rest = plan.rules, plan.simple, plan.verdicts, plan.rest
            else:
                simple = tuple(rule for rule in active if rule.expression is not None and not rule.requires)
                verdict_program = policy.verdicts(simple) if simple else None
                rest = tuple(rule for rule in active if rule.expression is None or rule.requires)
        else:
            active, simple, verdict_program, rest = plan.rules, plan.simple, plan.verdicts, plan.rest
        if not active:
            return
        if not scope.bound:
            self._bind_resource(context, scope, list(scope.chosen))
            scope.bound = True
        self._enter(context, scope, template, position, container)
        if simple:
            # Fast path: every verdict from one program. Only if it cannot give them all (a rule raised, or answered
            # something other than a boolean) do the rules run one by one below, to say which.
            try:
                verdicts = verdict_program.run(context)
            except Exception:
                verdicts = None
            if isinstance(verdicts, list) and len(verdicts) == len(simple) \
                    and all(isinstance(verdict, bool) for verdict in verdicts):
                for rule, verdict in zip(simple, verdicts):
                    if not verdict:
                        self._add(scope, policy, rule, "fail", rule.message.render(context),
                                  _where(base, container, rule.path))
                active = rest
        for rule in active:
            # A `when` that reads no cluster fact decides first whether the rule applies at all, so unknown facts
            # make a rule skip only where it applies (a CPU-only template is not "skipped" by a GPU quota rule).
            early = rule.when is not None and "cluster" not in rule.when.variables
            if early:
                try:
                    if rule.when.run(context) is not True:
                        continue
                except Exception as exc:
                    self._add(scope, policy, rule, "error", f"rule could not be evaluated: {exc}",
                              _where(base, container, rule.path))
                    continue
            missing = _missing_facts(rule, scope)
            if missing:
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
                if not early and rule.when is not None and rule.when.run(context) is not True:
                    continue
                if rule.expression is not None:
                    if rule.expression.run(context) is not True:
                        self._add(scope, policy, rule, "fail", rule.message.render(context),
                                  _where(base, container, rule.path))
                else:
                    for path, detail in rule.schema.errors(target):
                        context["error"] = detail
                        self._add(scope, policy, rule, "fail", rule.message.render(context),
                                  _where(base, container, jp.join("", *path)))
            except Exception as exc:  # a rule that cannot be evaluated fails closed, with the reason
                self._add(scope, policy, rule, "error", f"rule could not be evaluated: {exc}",
                          _where(base, container, rule.path))

    def _add(self, scope: _Scope, policy: Policy, rule: Rule, result: str, message: str, pointer: str) -> None:
        if scope.unreadable and any(pointer == bad or pointer.startswith(bad + "/") for bad in scope.unreadable):
            return  # the input error on that field says all there is to say
        if scope.workload is not None and scope.workload.unlisted:
            message += (f" [{scope.workload.unlisted} is not in the kinds table: this pod template was found by "
                        f"its shape]")
        scope.evaluation.findings.append(Finding(
            policy=policy.id, rule=rule.name, action=self._action(policy, rule, scope), result=result,
            message=message, resource=scope.resource, pointer=pointer))

    # ------------------------------------------------------------------ mutation
    def mutate(self, resource: Resource, facts: Optional[ClusterFacts] = None,
               deadline: Optional[float] = None) -> Mutation:
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
        if not chosen or scope.workload is None or scope.workload.errors:  # never patch what cannot be read whole
            out.patched = working
            return out
        context = new_context()
        self._bind_resource(context, scope, chosen)
        for policy in chosen:
            _check(deadline)
            for position, template in enumerate(scope.workload.templates):
                if template.spec is None:
                    continue
                # The variables are the working copy's own dicts, so a later `when` sees every change made before it.
                for mutation in policy.mutations:
                    if mutation.target == "pod":
                        self._enter(context, scope, template, position, None)
                        self._mutate_at(context, working, template.spec_pointer, mutation, out, policy.id)
                        continue
                    for container in template.containers:
                        if container.rename or not policy.takes(container):
                            continue
                        self._enter(context, scope, template, position, container)
                        self._mutate_at(context, working, container.pointer, mutation, out, policy.id)
        out.patched = working
        return out

    def _mutate_at(self, context: Activation, working: dict, base: str, mutation, out: Mutation,
                   policy_id: str) -> None:
        """Add one operation where `mutation` applies at `base`, applied to `working` at once."""
        try:
            if mutation.when is not None and mutation.when.run(context) is not True:
                return
            # a native program may answer with a part of the document itself: the patch must own its value
            value = copy.deepcopy(mutation.value.run(context))
        except Exception as exc:
            out.errors.append(f"{policy_id}/{mutation.name} at {base or '/'}: {exc}")
            return
        path = base + mutation.path
        if mutation.op == "default":
            operation = _default_op(working, path, value)
        else:
            operation = _append_op(working, path, value)
        if operation is not None:
            _apply(working, operation)
            out.operations.append(operation)
            out.by_policy.setdefault(policy_id, []).append(operation)


def _missing_facts(rule: Rule, scope: _Scope) -> list[str]:
    """The cluster facts a rule requires that nobody could supply for this resource."""
    known = scope.cluster or {}
    return [fact for fact in rule.requires if known.get(fact) is None]


def _present(presence: tuple, obj: dict, template: Optional[PodTemplate], container: Optional[Container]) -> bool:
    """Whether every (variable, field path) exists, as CEL's has() would see it."""
    for variable, path in presence:
        if variable == "container":
            node = container.obj if container else None
        elif variable == "pod":
            node = template.spec if template else None
        elif variable == "podMeta":
            node = template.metadata if template else None
        else:
            node = obj
        for name in path:
            if not isinstance(node, dict) or name not in node:
                return False
            node = node[name]
    return True


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
