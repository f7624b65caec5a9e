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
from webhook.engine.planning import Place, Step, where
from webhook.k8s.workload import Container, PodTemplate
from webhook.language.policy import Policy, Rule
from webhook.model import pointer as jp
from webhook.model.findings import Finding


_NONE_KNOWN: dict = {}


def run_place(engine: Any, context: Activation, scope: Scope, place: Place, base: str,
              template: Optional[PodTemplate], container: Optional[Container], position: Optional[int],
              deadline: Optional[float]) -> None:
    """The policies of `place` that have rules to run here, the deadline checked before each (and once for the
    policies with nothing to run after the last: planning.Place). The context is bound on the first of them."""
    if place.held is None:
        runs, trailing = place.always
    else:
        held = place.held(scope.resource.obj, template.spec if template else None,
                          template.metadata if template else None, container.obj if container else None)
        found = place.chosen.get(held)
        runs, trailing = found if found is not None else place.runs(held)
    target = None  # what a schema rule checks, set when the context is bound for this place
    for policy, binds, steps in runs:
        if deadline is not None:
            check_deadline(deadline)
        if target is None:
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
                run_rule(engine, context, scope, policy, step, base, container, target)
                continue
            try:
                when = step.when
                if when is not None and when(context) is not True:
                    continue
                if step.check(context) is not True:
                    rule = step.rule
                    add(engine, scope, policy, rule, "fail", rule.message.render(context),
                        where(base, container, rule.path))
            except Exception as exc:  # a rule that cannot be evaluated fails closed, with the reason
                add(engine, scope, policy, step.rule, "error", f"rule could not be evaluated: {exc}",
                    where(base, container, step.rule.path))
    if trailing and deadline is not None:
        check_deadline(deadline)


def run_rule(engine: Any, context: Activation, scope: Scope, policy: Policy, step: Step, base: str,
             container: Optional[Container], target: Any) -> None:
    """A rule that requires cluster facts (a `when` that reads none decides first whether it applies, so unknown
    facts make it skip only where it applies), or that checks a JSON Schema."""
    rule = step.rule
    when = step.when
    if rule.requires:
        # A `when` that reads no cluster fact decides first whether the rule applies at all, so unknown facts
        # make a rule skip only where it applies (a CPU-only template is not "skipped" by a GPU quota rule).
        if rule.early:
            try:
                if when(context) is not True:
                    return
            except Exception as exc:
                add(engine, scope, policy, rule, "error", f"rule could not be evaluated: {exc}",
                    where(base, container, rule.path))
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
