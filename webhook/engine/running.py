"""Running the rules at one place (the object, a template's pod spec, a container): the engine's inner loop.

engine/core.py walks the resource and calls `run_place` once per place with what planning.Place says runs there.
A rule that needs no cluster fact and checks an expression runs in that loop, its programs' functions called
directly (planning.Step); a rule that requires cluster facts, or checks a JSON Schema, through `outcome_of` (what
it decides) and `finding`. Either way a rule that cannot be evaluated is an `error` finding with the reason, and a
finding is built only for a rule that does not pass. Where a resource has several pod templates, what a place
decided is kept and replayed at an alike place of a later template (engine/sharing.py).
"""

from __future__ import annotations

from typing import Any, Optional

from webhook.cel.environment import Activation
from webhook.cel.runtime import Variables
from webhook.engine.binding import Scope, bind_resource, enter
from webhook.engine.deadline import check_deadline
from webhook.engine import sharing
from webhook.engine.planning import Place, Step, where
from webhook.engine.sharing import FAIL, SCHEMA
from webhook.k8s.workload import Container, PodTemplate
from webhook.language.policy import Policy, Rule
from webhook.model import pointer as jp
from webhook.model.findings import Finding


_NONE_KNOWN: dict = {}


def run_place(engine: Any, context: Activation, scope: Scope, place: Place, base: str,
              template: Optional[PodTemplate], container: Optional[Container], position: Optional[int],
              deadline: Optional[float]) -> None:
    """The policies of `place` that have rules to run here, the deadline checked before each (and once for the
    policies with nothing to run after the last: planning.Place). The context is bound on the first of them.

    Where the resource has several pod templates that may be alike (scope.shared), the outcomes at a place are kept, and
    the same place of a later template (the pod spec; the container of the same name) replays them where its
    conditions read the same data (engine/sharing.py)."""
    if place.held is None:
        runs, trailing = place.always
    else:
        held = place.held(scope.resource.obj, template.spec if template else None,
                          template.metadata if template else None, container.obj if container else None)
        found = place.chosen.get(held)
        runs, trailing = found if found is not None else place.runs(held)
    target = None  # what a schema rule checks, set when the context is bound for this place
    record = None
    if scope.shared is not None and runs:
        kept = scope.shared
        names = place.reads.get(id(runs), place)
        if names is place:  # kept with `runs`, whose id then stays its own; bounded as Place.chosen is
            names = (runs, sharing.reads(runs))
            if len(place.reads) < 256:
                place.reads[id(runs)] = names
        if names[0] is runs and names[1] is not None:
            target = _bind(engine, context, scope, template, container, position)
            values = tuple(context.get(name) for name in names[1])
            # a container is alike the one of its name in an earlier template (names are unique in a pod)
            slot = id(place) if container is None else (id(place), container.obj.get("name"))
            last = kept.last.get(slot)
            if last is not None and last[0] is runs and sharing.alike(last[1], values, kept.pairs):
                _replay(engine, context, scope, last[2], base, container, target, deadline)
                if trailing and deadline is not None:
                    check_deadline(deadline)
                return
            record = []  # filled below (a BudgetExceeded ends the whole evaluation, this one with it)
            kept.last[slot] = (runs, values, record)  # Place objects live as long as the engine: ids are not reused
    for policy, binds, steps in runs:
        if deadline is not None:
            check_deadline(deadline)
        if target is None:  # bound once per place, after the first policy's deadline check
            target = _bind(engine, context, scope, template, container, position)
        if binds:  # a fresh set of the policy's named variables (binding.bind_variables), without a call
            context["variables"] = Variables(policy.named, context)
        for step in steps:
            if not step.inline:  # through run_rule's two parts, so that an outcome with a finding can be kept
                outcome = outcome_of(engine, context, scope, policy, step)
                if outcome is not None:
                    if record is not None:
                        record.append((policy, binds, step, outcome))
                    finding(engine, context, scope, policy, step.rule, outcome, base, container, target)
                continue
            try:
                when = step.when
                if when is not None and when(context) is not True:
                    continue
                if step.check(context) is not True:
                    outcome = FAIL
                else:
                    continue
            except Exception as exc:  # a rule that cannot be evaluated fails closed, with the reason
                outcome = ("error", f"rule could not be evaluated: {exc}")
            if record is not None:
                record.append((policy, binds, step, outcome))
            finding(engine, context, scope, policy, step.rule, outcome, base, container, target)
    if trailing and deadline is not None:
        check_deadline(deadline)


def _bind(engine: Any, context: Activation, scope: Scope, template: Optional[PodTemplate],
          container: Optional[Container], position: Optional[int]) -> Any:
    """Bind the context for this place (the resource on the first place, the template where the walk enters
    another: its containers share it) and answer what a schema rule checks here."""
    classification = scope.classification or engine.config.classification
    if not scope.bound:
        bind_resource(context, scope, list(scope.chosen), classification, scope.reads)
        scope.bound = True
    entered = scope.entered
    if entered is None or entered[0] is not template or entered[1] is not container:
        # the template part only where the walk enters another template (its containers share it)
        enter(context, scope, template if entered is None or entered[0] is not template else None,
              position, container, classification)
        scope.entered = (template, container)
    return container.obj if container else (template.spec if template else scope.resource.obj)


def _replay(engine: Any, context: Activation, scope: Scope, record: list, base: str,
            container: Optional[Container], target: Any, deadline: Optional[float]) -> None:
    """The findings an alike place made, made here (engine/sharing.py): each at this place's pointer, a failed
    check's message rendered here, a schema checked here; the deadline checked before each."""
    fresh = None  # the policy whose fresh `variables` the context holds
    for policy, binds, step, outcome in record:
        if deadline is not None:
            check_deadline(deadline)
        if binds and fresh is not policy and (outcome is FAIL or outcome is SCHEMA):  # a message is rendered
            context["variables"] = Variables(policy.named, context)
            fresh = policy
        finding(engine, context, scope, policy, step.rule, outcome, base, container, target)


def outcome_of(engine: Any, context: Activation, scope: Scope, policy: Policy, step: Step) -> Any:
    """A rule that requires cluster facts (a `when` that reads none decides first whether it applies, so unknown
    facts make it skip only where it applies), or that checks a JSON Schema: what it decides here. None (no
    finding), FAIL (its check is false: its message), SCHEMA (it applies: its schema is checked), or (result,
    message) of a finding whose message is fixed."""
    rule = step.rule
    when = step.when
    if rule.requires:
        # A `when` that reads no cluster fact decides first whether the rule applies at all, so unknown facts
        # make a rule skip only where it applies (a CPU-only template is not "skipped" by a GPU quota rule).
        if rule.early:
            try:
                if when(context) is not True:
                    return None
            except Exception as exc:
                return ("error", f"rule could not be evaluated: {exc}")
            when = None
        known, missing = scope.cluster or _NONE_KNOWN, None  # the facts nobody could supply for this resource
        for fact in rule.requires:
            if known.get(fact) is None:
                missing = [fact] if missing is None else missing + [fact]
        if missing:  # what that decides depends only on the engine's config and the facts missing: kept per step
            missing = tuple(missing)
            decided = step.unknown.get(missing, step)
            if decided is step:
                decided = _unknown(engine, policy, rule, missing)
                if len(step.unknown) < 64:  # which facts are missing: a few combinations of rule.requires
                    step.unknown[missing] = decided
            return decided
    try:
        if when is not None and when(context) is not True:
            return None
        if step.check is None:
            return SCHEMA
        return FAIL if step.check(context) is not True else None
    except Exception as exc:  # a rule that cannot be evaluated fails closed, with the reason
        return ("error", f"rule could not be evaluated: {exc}")


def _unknown(engine: Any, policy: Policy, rule: Rule, missing: tuple) -> Any:
    """What a rule decides where the cluster facts it requires are `missing`: nothing, a failure or a skip, by the
    rule's `whenUnknown` and the policy's (else the config's) `contextFailure`."""
    config = engine.config
    mode = config.settings(policy.id).context_failure or config.context_failure
    if rule.when_unknown == "ignore" or mode == "allow":
        return None
    if mode == "deny":
        return ("fail", f"cluster facts unavailable: {', '.join(missing)}")
    return ("skip", f"{policy.id}/{rule.name} skipped: cluster facts unknown: {', '.join(missing)}")


def finding(engine: Any, context: Activation, scope: Scope, policy: Policy, rule: Rule, outcome: Any, base: str,
            container: Optional[Container], target: Any) -> None:
    """The finding(s) of an outcome (`outcome_of`, or an inline step's) at this place."""
    if outcome is FAIL:
        add(engine, scope, policy, rule, "fail", rule.message.render(context), where(base, container, rule.path))
    elif outcome is SCHEMA:
        try:
            for path, detail in rule.schema.errors(target):
                context["error"] = detail
                add(engine, scope, policy, rule, "fail", rule.message.render(context),
                    where(base, container, jp.join("", *path)))
        except Exception as exc:  # a rule that cannot be evaluated fails closed, with the reason
            add(engine, scope, policy, rule, "error", f"rule could not be evaluated: {exc}",
                where(base, container, rule.path))
    else:
        add(engine, scope, policy, rule, outcome[0], outcome[1], where(base, container, rule.path))


def add(engine: Any, scope: Scope, policy: Policy, rule: Rule, result: str, message: str, pointer: str) -> None:
    """One finding, unless an input error on that field already says all there is to say."""
    if scope.unreadable and any(pointer == bad or pointer.startswith(bad + "/") for bad in scope.unreadable):
        return
    if scope.workload is not None and scope.workload.unlisted:
        message += (f" [{scope.workload.unlisted} is not in the kinds table: this pod template was found by "
                    f"its shape]")
    action = engine.enforcement.action(policy, rule, scope.ceiling)
    scope.evaluation.findings.append(Finding(policy.id, rule.name, action, result, message, scope.resource,
                                             pointer))  # positional: no keyword dict (model/findings.py)
