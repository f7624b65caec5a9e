"""Mutation: the JSON Patch that adds what the matching policies' mutations describe, where it is absent.

Operations are applied to a working copy as they are made (model/patch.py), so
every later `when` sees the earlier ones and a second run on the result yields
nothing. A policy lowered to `audit` (config or namespace label) observes only.
"""

from __future__ import annotations

import copy
from typing import Optional

from webhook.cel.environment import Activation, new_context
from webhook.engine.binding import Scope, bind_resource, bind_variables, enter
from webhook.engine.deadline import check_deadline
from webhook.model import patch
from webhook.model.findings import Mutation
from webhook.k8s.workload import Classification


def mutate(scope: Scope, chosen: list, working: dict, classification: Classification,
           deadline: Optional[float] = None) -> Mutation:
    """The patch of the `chosen` policies' mutations on `working`, the copy `scope` was made over."""
    out = Mutation()
    if not chosen or scope.workload is None:
        out.patched = working
        return out
    context = new_context()
    bind_resource(context, scope, chosen, classification)
    for policy in chosen:
        check_deadline(deadline)
        for position, template in enumerate(scope.workload.templates):
            if template.spec is None:
                continue
            # The variables are the working copy's own dicts, so a later `when` sees every change made before it.
            for mutation in policy.mutations:
                check_deadline(deadline)
                if mutation.target == "pod":
                    enter(context, scope, template, position, None, classification)
                    if policy.named:  # afresh: an earlier mutation may have changed what they read
                        bind_variables(context, policy)
                    _mutate_at(context, working, template.spec_pointer, mutation, out, policy.id)
                    continue
                for container in template.containers:
                    if container.rename or not policy.takes(container):
                        continue
                    check_deadline(deadline)
                    enter(context, scope, template, position, container, classification)
                    if policy.named:
                        bind_variables(context, policy)
                    _mutate_at(context, working, container.pointer, mutation, out, policy.id)
    out.patched = working
    return out


def _mutate_at(context: Activation, working: dict, base: str, mutation, out: Mutation, policy_id: str) -> None:
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
        operation = patch.default_op(working, path, value)
    else:
        operation = patch.append_op(working, path, value)
    if operation is not None:
        patch.apply(working, operation)
        out.operations.append(operation)
        out.by_policy.setdefault(policy_id, []).append(operation)
