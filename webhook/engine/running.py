"""Running the rules at one place (the object, a template's pod spec, a container): the engine's inner loop.

engine/core.py walks the resource and calls `run_place` once per place with what planning.Place says runs there.
A rule that needs no cluster fact and checks an expression runs in that loop, its programs' functions called
directly (planning.Step); a rule that requires cluster facts, or checks a JSON Schema, through `run_rule`. Either
way a rule that cannot be evaluated is an `error` finding with the reason, and a finding is built only for a rule
that does not pass.
"""

from __future__ import annotations

from typing import Any, Optional

from webhook.cel.environment import Activation
from webhook.cel.runtime import Variables
from webhook.engine.binding import Scope, bind_resource, enter
from webhook.engine.deadline import check_deadline
from webhook.engine import sharing
from webhook.engine.planning import Place, Step, where
from webhook.engine.sharing import FAIL, RUN
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

    Where the resource has several places (scope.shared is a dict), the outcomes at a place are kept, and a place
    of the same kind whose conditions read the same data replays them (engine/sharing.py)."""
    if place.held is None:
        runs, trailing = place.always
    else:
        held = place.held(scope.resource.obj, template.spec if template else None,
                          template.metadata if template else None, container.obj if container else None)
        found = place.chosen.get(held)
        runs, trailing = found if found is not None else place.runs(held)
    target = None  # what a schema rule checks, set when the context is bound for this place
    shared, record = scope.shared, None
    if shared is not None and runs:
        names = place.reads.get(id(runs), place)
        if names is place:  # kept with `runs`, whose id then stays its own; bounded as Place.chosen is
            names = (runs, sharing.reads(runs))
            if len(place.reads) < 256:
                place.reads[id(runs)] = names
        if names[0] is runs and names[1] is not None:
            target = _bind(engine, context, scope, template, container, position)
            values = tuple(context.get(name) for name in names[1])
            last = shared.get(id(place))
            if last is not None and last[0] is runs and sharing.alike(last[1], values, shared[None]):
                _replay(engine, context, scope, last[2], base, container, target, deadline)
                if trailing and deadline is not None:
                    check_deadline(deadline)
                return
            record = []
    for policy, binds, steps in runs:
        if deadline is not None:
            check_deadline(deadline)
        if target is None:  # as _bind does, without its call (most places are bound here)
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
            target = container.obj if container else (template.spec if template else scope.resource.obj)
        if binds:  # a fresh set of the policy's named variables (binding.bind_variables), without a call
            context["variables"] = Variables(policy.named, context)
        for step in steps:
            if not step.inline:
                if record is None:
                    run_rule(engine, context, scope, policy, step, base, container, target)
                elif step.rule.requires and step.rule.early:  # its `when` decides first: kept with the outcome
                    applies = applying(step, context)
                    record.append((policy, binds, step, (applies,)))
                    run_rule(engine, context, scope, policy, step, base, container, target, applies)
                else:
                    record.append((policy, binds, step, RUN))
                    run_rule(engine, context, scope, policy, step, base, container, target)
                continue
            try:
                when = step.when
                if when is not None and when(context) is not True:
                    continue
                if step.check(context) is not True:
                    rule = step.rule
                    if record is not None:
                        record.append((policy, binds, step, FAIL))
                    add(engine, scope, policy, rule, "fail", rule.message.render(context),
                        where(base, container, rule.path))
            except Exception as exc:  # a rule that cannot be evaluated fails closed, with the reason
                message = f"rule could not be evaluated: {exc}"
                if record is not None:
                    record.append((policy, binds, step, message))
                add(engine, scope, policy, step.rule, "error", message, where(base, container, step.rule.path))
    if record is not None:
        shared[id(place)] = (runs, values, record)  # Place objects live as long as the engine: ids are not reused
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
        enter(context, scope, template if entered is None or entered[0] is not template else None,
              position, container, classification)
        scope.entered = (template, container)
    return container.obj if container else (template.spec if template else scope.resource.obj)


def _replay(engine: Any, context: Activation, scope: Scope, record: list, base: str,
            container: Optional[Container], target: Any, deadline: Optional[float]) -> None:
    """The findings an alike place made, made here (engine/sharing.py): each at this place's pointer, a failed
    check's message rendered here, a rule that run_rule runs run again; the deadline checked before each."""
    fresh = None  # the policy whose fresh `variables` the context holds
    for policy, binds, step, outcome in record:
        if deadline is not None:
            check_deadline(deadline)
        rule = step.rule
        if type(outcome) is str:
            add(engine, scope, policy, rule, "error", outcome, where(base, container, rule.path))
            continue
        if type(outcome) is tuple and outcome[0] is False:  # a rule whose `when` did not apply there
            continue
        if binds and fresh is not policy:
            context["variables"] = Variables(policy.named, context)
            fresh = policy
        if outcome is RUN:
            run_rule(engine, context, scope, policy, step, base, container, target)
        elif type(outcome) is tuple:
            run_rule(engine, context, scope, policy, step, base, container, target, outcome[0])
        else:
            add(engine, scope, policy, rule, "fail", rule.message.render(context), where(base, container, rule.path))


def applying(step: Step, context: Activation) -> Any:
    """Whether the early `when` of a rule that requires cluster facts holds (True, False), or the error finding's
    message when it cannot be evaluated: run_rule's first question, asked apart where its answer is kept."""
    try:
        return step.when(context) is True
    except Exception as exc:
        return f"rule could not be evaluated: {exc}"


def run_rule(engine: Any, context: Activation, scope: Scope, policy: Policy, step: Step, base: str,
             container: Optional[Container], target: Any, applies: Any = None) -> None:
    """A rule that requires cluster facts (a `when` that reads none decides first whether it applies, so unknown
    facts make it skip only where it applies), or that checks a JSON Schema. `applies`: that `when`'s answer
    (`applying`), when the caller asked it already."""
    rule = step.rule
    when = step.when
    if rule.requires:
        # A `when` that reads no cluster fact decides first whether the rule applies at all, so unknown facts
        # make a rule skip only where it applies (a CPU-only template is not "skipped" by a GPU quota rule).
        if rule.early:
            if applies is None:  # asked here (the common case: nothing is kept), without applying's call
                try:
                    if when(context) is not True:
                        return
                except Exception as exc:
                    add(engine, scope, policy, rule, "error", f"rule could not be evaluated: {exc}",
                        where(base, container, rule.path))
                    return
            elif applies is not True:  # as `applying` answered it
                if applies is not False:
                    add(engine, scope, policy, rule, "error", applies, where(base, container, rule.path))
                return
            when = None
        known, missing = scope.cluster or _NONE_KNOWN, None  # the facts nobody could supply for this resource
        for fact in rule.requires:
            if known.get(fact) is None:
                missing = [fact] if missing is None else missing + [fact]
        if missing:
            config = engine.config
            mode = config.settings(policy.id).context_failure or config.context_failure
            if rule.when_unknown == "ignore" or mode == "allow":
                return
            result = "fail" if mode == "deny" else "skip"
            add(engine, scope, policy, rule, result,
                f"{policy.id}/{rule.name} skipped: cluster facts unknown: {', '.join(missing)}"
                if result == "skip" else f"cluster facts unavailable: {', '.join(missing)}",
                where(base, container, rule.path))
            return
    try:
        if when is not None and when(context) is not True:
            return
        if step.check is not None:
            if step.check(context) is not True:
                add(engine, scope, policy, rule, "fail", rule.message.render(context),
                    where(base, container, rule.path))
        else:
            for path, detail in rule.schema.errors(target):
                context["error"] = detail
                add(engine, scope, policy, rule, "fail", rule.message.render(context),
                    where(base, container, jp.join("", *path)))
    except Exception as exc:  # a rule that cannot be evaluated fails closed, with the reason
        add(engine, scope, policy, rule, "error", f"rule could not be evaluated: {exc}",
            where(base, container, rule.path))


def add(engine: Any, scope: Scope, policy: Policy, rule: Rule, result: str, message: str, pointer: str) -> None:
    """One finding, unless an input error on that field already says all there is to say."""
    if scope.unreadable and any(pointer == bad or pointer.startswith(bad + "/") for bad in scope.unreadable):
        return
    if scope.workload is not None and scope.workload.unlisted:
        message += (f" [{scope.workload.unlisted} is not in the kinds table: this pod template was found by "
                    f"its shape]")
    scope.evaluation.findings.append(Finding(
        policy=policy.id, rule=rule.name, action=engine.enforcement.action(policy, rule, scope.ceiling),
        result=result, message=message, resource=scope.resource, pointer=pointer))
