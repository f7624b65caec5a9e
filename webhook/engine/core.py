"""The engine: a compiled policy set evaluated against one resource at a time.

Evaluation does no parsing and no I/O: policies were checked at load, each CEL
program is compiled into a Python function once (cel/compiler.py; at its first
run, or all at once by `prepare()` in the webhook), and the candidates for a
(kind, classes) pair are computed once and cached. This module orchestrates;
the parts are enforcement (actions, exceptions, the namespace ceiling),
binding (the variables rules read), planning (what runs at each level) and
mutation. A pod that is not an AI workload meets one policy
(devices-declared) at most.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any, Iterable, Optional

from webhook.engine.binding import Scope, policy_reads
from webhook.engine.deadline import BudgetExceeded, check_deadline, copy_json
from webhook.engine.enforcement import Enforcement
from webhook.engine.planning import Place, Plan
from webhook.engine.running import run_place
from webhook.k8s.deviceclasses import accelerated, presumed, unchecked
from webhook.k8s.selectors import selector_matches
from webhook.k8s.workload import Classification, ShapeError, no_tick, build_workload, kind_table
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.checks import Checks
from webhook.language.config import Config, ConfigError, load_config
from webhook.engine import sharing
from webhook.language.loader import load_all
from webhook.language.vapload import InTree
from webhook.language.policy import Policy
from webhook.model.facts import ClusterFacts, NoFacts
from webhook.model.findings import Evaluation, Mutation
from webhook.model.resource import Resource

__all__ = ["BudgetExceeded", "Engine"]


class Engine:
    """A policy set plus its config, ready to evaluate and to mutate."""

    def __init__(self, policies: list[Policy], config: Optional[Config] = None, intree: Optional[InTree] = None):
        self.config = config or Config()
        self.intree = intree or InTree()  # the user's ValidatingAdmissionPolicies (engine/vap.py)
        self.policies = [p for p in policies if self.config.settings(p.id).enabled]
        self.by_id = {p.id: p for p in policies}
        unknown = [(u, u, f"policies.{u}") for u in sorted(set(self.config.policies) - set(self.by_id))]
        unknown += [((e.name, u), u, f"exception {e.name}: policies") for e in self.config.exceptions
                    for u in e.policies if u != "*" and u not in self.by_id  # would exempt nothing
                    and self.config.place((e.name, u), None)]  # the user's file (the defaults name the bundle's)
        if unknown:
            from difflib import get_close_matches

            raise ConfigError([f"{self.config.place(key)}: {field}: unknown policy id {u!r}"
                               + "".join(f" (did you mean {c!r}?)" for c in get_close_matches(u, self.by_id, n=1))
                               for key, u, field in unknown])
        self.enforcement = Enforcement(self.config, self.policies)
        self._pod_rules = {p.id for p in self.policies if p.target == "container"
                           and any(r.target == "pod" for r in p.rules)}
        self._candidates: dict[tuple, tuple[Policy, ...]] = {}
        self._plans: dict[tuple, Plan] = {}  # (policy, level, classes, has pod spec) -> what runs there
        self._places: dict[tuple, tuple] = {}  # (kind, classes, namespace) -> the candidates placed there (_placed)
        self._layouts: dict[tuple, tuple] = {}  # (chosen policy ids, classes) -> their plans by level (_layout)
        self.generation = 0
        kind_table()  # read now, so that forked workers and every review share the one table

    @classmethod
    def load(cls, policy_paths: Optional[Iterable[str]] = None, config_path: Optional[str] = None,
             own_namespace: Optional[str] = None, cache: Any = None) -> "Engine":
        """Load the config and the policies (the built-in bundle by default).

        `cache`: what remembers checks and compiled programs between runs (the command line's
        app/diskcache.DiskCache); the webhook passes none and checks everything it has no record of.
        """
        checks = Checks(cache)
        config = load_config(config_path, own_namespace, checks)
        policies, intree = load_all(list(policy_paths or [BUILTIN_POLICY_DIR]), config.params(), checks,
                                    config.cel_limits)
        return cls(policies, config, intree)

    def action_of(self, policy_id: str) -> Optional[str]:
        """The configured action of an enabled policy, None when it is disabled."""
        return self.enforcement.actions.get(policy_id)

    def prepare(self) -> "Engine":
        """Compile every CEL program now rather than at its first run (the webhook, before it serves a review).

        A one-shot audit leaves programs to compile on first use, since most never
        run; a server would otherwise charge the compiling to its first reviews.
        """
        for policy in self.policies:
            for expression in policy.expressions():
                expression.program  # noqa: B018 - compiles and keeps it
            for rule in policy.rules:
                rule.message.program  # noqa: B018 - the message's one render function (cel/templates.py)
        return self

    # ------------------------------------------------------------------ selection
    def candidates(self, kind: str, classes: frozenset) -> tuple[Policy, ...]:
        key = (kind, classes)
        found = self._candidates.get(key)
        if found is None:
            found = tuple(p for p in self.policies if p.match.admits(kind, classes))
            self._candidates[key] = found
        return found

    def _placed(self, kind: str, classes: frozenset, namespace: str) -> tuple:
        """The candidates that apply in this namespace, each with whether its label selector is still to be matched
        and whether an exception or an exemption annotation could cover it here (else `exempt` is not asked); and,
        when none has either, the policies and their ids as they are chosen (nothing left to ask per resource)."""
        key = (kind, classes, namespace)
        found = self._places.get(key)
        if found is None:
            exemptable = self.config.annotation_exemptable
            entries = tuple((p, p.match.selector is not None,
                             bool(self.enforcement.exceptions_for(p.id, namespace)) or p.id in exemptable)
                            for p in self.candidates(kind, classes) if p.match.admits_namespace(namespace))
            plain = None if any(selective or exempt for _, selective, exempt in entries) else \
                (tuple(p for p, _, _ in entries), tuple(p.id for p, _, _ in entries))
            found = (entries, plain)
            if len(self._places) < 65536:
                self._places[key] = found
        return found

    def scope(self, resource: Resource, facts: Optional[ClusterFacts],
              deadline: Optional[float] = None) -> tuple[Scope, list[Policy]]:
        """The resource's workload and classes, and the policies that apply to it (not exempt, in its place)."""
        evaluation = Evaluation(resource)
        facts = facts or NoFacts()
        scope = Scope(resource, None, facts, None, None, evaluation)
        if not isinstance(resource.obj, dict) or self.config.excluded(resource.namespace):
            return scope, []
        namespace_labels = facts.namespace_labels(resource.namespace) if resource.namespace else None
        if namespace_labels is None and resource.namespace and getattr(facts, "complete", False):
            namespace_labels = self._unknown_namespace(resource.namespace, evaluation)
        try:
            extended = getattr(facts, "extended_resources", None)  # DeviceClasses' extended resources, if known
            extended = extended() if callable(extended) else None
            scope.classification = accelerated(self.config.classification, extended) if extended \
                else self.config.classification
            tick = partial(check_deadline, deadline) if deadline is not None else no_tick
            scope.workload = build_workload(resource, scope.classification, namespace_labels, tick)
            if extended is None and getattr(facts, "complete", False):  # the live DeviceClasses are unknown
                scope.classification, rebuilt = self._unknown_device_classes(scope, evaluation)
                if rebuilt:
                    scope.workload = build_workload(resource, scope.classification, namespace_labels, tick)
        except ShapeError as exc:
            evaluation.error_at(exc.pointer, exc.message)
            return scope, []
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
            # A shape the checks above did not foresee: an answer that says so (fail closed), never a crash.
            evaluation.error_at("", f"cannot read this object: {type(exc).__name__}: {str(exc)[:200]}")
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
        entries, plain = self._placed(resource.kind, classes, resource.namespace)
        if plain is not None:  # no selector to match, no exemption to ask: the same policies for every resource
            chosen = list(plain[0])
            evaluation.policies = plain[1]
        else:
            labels = resource.labels
            chosen = [p for p, selective, exemptable in entries
                      if not (selective and not selector_matches(p.match.selector, labels))
                      and not (exemptable and self.enforcement.exempt(p.id, resource, evaluation))]
            evaluation.policies = tuple(p.id for p in chosen)
        evaluation.evaluated = bool(chosen) or scope.workload is not None
        return scope, chosen

    def _unknown_namespace(self, namespace: str, evaluation: Evaluation) -> dict:
        """The labels to judge by when facts that should know every namespace do not know this one (a cache stale
        or not synced, a namespace created a moment ago): the strictest reading, tier `untrusted` and no enforcement
        ceiling, said in a note (docs/security.md, invariant b). Never "no tier"."""
        evaluation.notes.append(f"namespace {namespace}: its labels are unknown (cluster context stale or not yet "
                                f"synced): judged at tier untrusted")
        return {self.config.classification.tier_label: "untrusted"}

    def _unknown_device_classes(self, scope: Scope, evaluation: Evaluation) -> tuple[Classification, bool]:
        """The classification to judge by when facts that should know every DeviceClass do not (the webhook's cache
        not synced or stale), and whether it differs: an untrusted workload's domain-qualified extended resources
        that a DeviceClass could back are read as accelerators (the strict reading); a trusted one keeps the config's
        lists. Either way a note names them (docs/security.md)."""
        classification = scope.classification or self.config.classification
        names = unchecked(scope.workload, classification)
        if not names:
            return classification, False
        listed = ", ".join(names)
        if "untrusted" in scope.workload.classes:
            evaluation.notes.append(f"DeviceClasses unknown (cluster context stale or not yet synced): {listed} "
                                    f"judged as accelerator(s), the strictest reading for an untrusted workload")
            return presumed(classification, names), True
        evaluation.notes.append(f"DeviceClasses unknown (cluster context stale or not yet synced): whether {listed} "
                                f"is an accelerator (a DeviceClass's extendedResourceName) was not checked; judged "
                                f"by the config's accelerators list")
        return classification, False

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, resource: Resource, facts: Optional[ClusterFacts] = None,
                 deadline: Optional[float] = None, in_tree: bool = True) -> Evaluation:
        """Findings of every matching policy. `deadline` (time.monotonic()) raises BudgetExceeded between rules
        runs, inside the walk over templates and containers."""
        evaluation = self._evaluate(resource, facts, deadline)
        intree = self.intree  # the user's ValidatingAdmissionPolicies (engine/vap.py); asked without InTree.__bool__
        if (intree.policies or intree.bindings) and isinstance(resource.obj, dict):
            from webhook.engine import vap  # with its API-server defaulting: only for a bundle with in-tree policies

            found, matched = vap.evaluate(self.intree, resource, facts or NoFacts(), deadline)
            evaluation.findings += found
            evaluation.evaluated = evaluation.evaluated or bool(matched)
            evaluation.policies += tuple(name for name in matched if name not in evaluation.policies)
        if in_tree and self.intree.mutating_bindings and isinstance(resource.obj, dict):  # MAPs (mapeval.py)
            from webhook.engine import mapeval, mapreport

            outcome = mapeval.mutate(self.intree, resource, facts or NoFacts(), deadline)
            steps: dict = {}
            for p, b, before, after in outcome.steps:  # a reinvoked policy's steps add up
                steps.setdefault((p, b), []).extend(mapreport.changes(before, after))
            evaluation.findings += mapreport.findings(outcome, steps, resource)
            evaluation.evaluated = evaluation.evaluated or bool(outcome.matched)
            evaluation.policies += tuple(name for name in outcome.matched if name not in evaluation.policies)
        return evaluation

    def _evaluate(self, resource: Resource, facts: Optional[ClusterFacts], deadline: Optional[float]) -> Evaluation:
        scope, chosen = self.scope(resource, facts, deadline)
        if not chosen:
            return scope.evaluation
        # A plain dict, not an Activation: generated code reads it by subscript (`A['container']`, ~130 reads per GPU
        # pod), which a dict subclass sends through its `__getitem__` method (CPython's slot for a subclass of
        # dict): ~270 instructions a read more (bench/RESULTS.md, h-eval). The `variables` bound in it hold it
        # (cel/values.py), so they are taken out when the evaluation ends, however it ends.
        context: dict = {}
        try:
            self._run(context, scope, chosen, deadline)
        finally:
            context.pop("variables", None)
        return scope.evaluation

    def _run(self, context: dict, scope: Scope, chosen: list, deadline: Optional[float]) -> None:
        """The chosen policies' rules at every place of the resource: the object, each template's pod spec, each
        container (engine/running.py `run_place`), the outcomes kept where templates may be alike."""
        scope.chosen = tuple(chosen)
        objects, pods, containers, scope.reads, taking = self._layout(scope.evaluation.policies,
                                                                      scope.evaluation.classes, chosen)
        if objects.entries:
            run_place(self, context, scope, objects, "", None, None, None, deadline)
        if scope.workload is not None and (pods.entries or containers):
            templates = scope.workload.templates
            if len(templates) > 1 and sharing.worth(templates):  # templates that may be alike (engine/sharing.py):
                scope.shared = sharing.Kept()
            for position, template in enumerate(templates):
                has_spec = template.spec is not None
                if has_spec and pods.entries:
                    run_place(self, context, scope, pods, template.spec_pointer, template, None, position, deadline)
                if not containers:
                    continue
                places = taking[has_spec]
                for container in template.containers:
                    key = Policy.taken_as(container)
                    place = places.get(key)
                    if place is None:  # the container policies that take such a container, each with its plan
                        place = places[key] = Place(tuple((p, with_spec if has_spec else without_spec)
                                                          for p, with_spec, without_spec in containers
                                                          if p.takes(container)))
                    if place.entries:
                        run_place(self, context, scope, place, container.pointer, template, container, position,
                                  deadline)

    def _layout(self, ids: tuple, classes: frozenset, chosen: list) -> tuple:
        """The chosen policies by level, each with its plan there: the object's and the pod specs' places
        (planning.Place), the container policies with (plan with a pod spec, plan without); what they read
        (binding.policy_reads); and, filled as containers come, the place of each kind of container
        (Policy.taken_as), without and with a pod spec. Depends only on which policies were chosen and the classes,
        so it is made once per such pair, not per resource."""
        key = (ids, classes)
        layout = self._layouts.get(key)
        if layout is None:
            objects = Place(tuple((p, self._plan(p, "object", classes, False)) for p in chosen
                                  if p.target == "object"))
            pods = Place(tuple((p, self._plan(p, "pod", classes, True)) for p in chosen
                               if p.target == "pod" or p.id in self._pod_rules))  # a container policy's pod rules too
            containers = tuple((p, self._plan(p, "container", classes, True), self._plan(p, "container", classes, False))
                               for p in chosen if p.target == "container")
            layout = (objects, pods, containers, policy_reads(chosen), ({}, {}))  # places without, with a pod spec
            if len(self._layouts) < 4096:
                self._layouts[key] = layout
        return layout

    def _plan(self, policy: Policy, level: str, classes: frozenset, has_spec: bool) -> Plan:
        key = (policy.id, level, classes, has_spec)
        plan = self._plans.get(key)
        if plan is None:  # what does not depend on the object's fields: the same for every resource of its classes
            plan = self._plans[key] = Plan.of(policy, level, classes, has_spec)
        return plan

    # ------------------------------------------------------------------ mutation
    def mutate(self, resource: Resource, facts: Optional[ClusterFacts] = None,
               deadline: Optional[float] = None, skip: frozenset = frozenset(), in_tree: bool = True) -> Mutation:
        """JSON Patch that adds what the matching policies' mutations describe, where it is absent (mutation.py);
        `skip`: ids of policies whose mutations another applies (the API server, config `inTree`). `in_tree`: the
        user's MutatingAdmissionPolicies first, as the API server runs them before the webhooks (fix, test; the
        webhook itself leaves them to the API server)."""
        working = copy_json(resource.obj, deadline) if deadline is not None else copy.deepcopy(resource.obj)
        early: list = []
        if in_tree and self.intree.mutating_bindings and isinstance(working, dict):
            early = self._mutate_in_tree(resource, facts, deadline, working)
        scope, chosen = self.scope(Resource(working, resource.origin), facts, deadline)
        chosen = [p for p in chosen if p.mutations and p.id not in skip
                  and not self.enforcement.observes_only(p, scope.ceiling)]
        if scope.workload is not None and scope.workload.errors:  # never patch what cannot be read whole
            chosen = []
        from webhook.engine import mutation  # an audit mutates nothing: imported by the first mutation

        out = mutation.mutate(scope, chosen, working, scope.classification or self.config.classification, deadline)
        for policy, operations in reversed(early):
            out.operations[:0] = operations
            out.by_policy = {policy: out.by_policy.get(policy, []) + operations, **out.by_policy}
        return out

    def _mutate_in_tree(self, resource: Resource, facts: Optional[ClusterFacts], deadline: Optional[float],
                        working: dict) -> list:
        """The MAPs' writes applied to `working` (engine/mapreport.py `onto`): [(policy, operations)]."""
        from webhook.engine import mapeval, mapreport
        from webhook.model import patch

        outcome = mapeval.mutate(self.intree, resource, facts or NoFacts(), deadline, redefault=False)
        found = []
        for policy, _, before, after in outcome.steps:
            operations = mapreport.onto(working, mapreport.changes(before, after))
            operations = [op for op in operations if op["op"] == "add"]  # a removal is not written (fix adds)
            for operation in operations:
                patch.apply(working, operation)
            if operations:
                found.append((policy, operations))
        return found

