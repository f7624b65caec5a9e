"""A policy's mutations as a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, JSON Patch) and its binding.

Why JSON Patch: the engine's mutations are `add` operations built where a value is absent (model/patch.py):
`default` adds the first missing step of its path carrying the rest as nested maps, `append` adds to the end of a
list (the list itself when absent). Both are written here as CEL that yields those same operations, over the same
pod-template walk as the ValidatingAdmissionPolicies (vapcel.py, with each template's JSON pointer). Decisions
(docs/cli.md, "export"):

- One `mutations` entry per aiadmit mutation, in the policy's order: the API server applies them in order, each
  over the object the previous ones left, with its variables evaluated afresh, as the engine applies each one to
  its working copy before the next `when` runs.
- CREATE only: on UPDATE the webhook mutates only when the pod templates changed, and never a Pod.
- failurePolicy Ignore and reinvocationPolicy IfNeeded, as the mutating webhook (its mutations are idempotent).
- The binding leaves out the config's excluded namespaces and exceptions, and namespaces whose enforcement label is
  `audit` (a policy lowered to audit observes only, so the engine does not mutate there).
"""

from __future__ import annotations

import re

from webhook.language.policy import Policy
from webhook.outputs import vapcel
from webhook.outputs.vapcel import NotExportable, literal

GROUP = "admissionregistration.k8s.io/v1"
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECTIONS = {"containers": ("containers",), "initContainers": ("initContainers",),
             "all": ("initContainers", "containers")}  # the engine's walk order (webhook/k8s/podtemplates.py)


def _steps(path: str) -> list[str]:
    steps = [s for s in path.split("/") if s]
    for step in steps:
        if not _FIELD.match(step):
            raise NotExportable(f"its path step {step!r} is not a CEL field name")
    if not steps:
        raise NotExportable("it has an empty path")
    return steps


def _patch(path: str, value: str) -> str:
    return f'JSONPatch{{op: "add", path: {path}, value: {value}}}'


def _default(base: str, pointer: str, steps: list[str], value: str) -> str:
    """patch.default_op in CEL: the add of the first missing step, carrying the rest as nested maps."""
    out = "[]"
    for depth in range(len(steps), 0, -1):
        nested = value
        for inner in reversed(steps[depth:]):
            nested = f"{{{literal(inner)}: dyn({nested})}}"
        at = ".".join([base] + steps[:depth])
        path = f"{pointer} + {literal('/' + '/'.join(steps[:depth]))}"
        out = f"!has({at}) ? [{_patch(path, nested)}] : ({out})"
    return out


def _append(base: str, pointer: str, steps: list[str], value: str) -> str:
    """patch.append_op in CEL: the add at the end of the list, or of the list itself where its parent is."""
    full = ".".join([base] + steps)
    path = f"{pointer} + {literal('/' + '/'.join(steps))}"
    parents = [f"has({'.'.join([base] + steps[:d])})" for d in range(1, len(steps))]
    parent = " && ".join(parents) if parents else "true"
    return (f"has({full}) ? (type({full}) == list ? [{_patch(path + ' + ' + literal('/-'), value)}] : []) : "
            f"({parent}) ? [{_patch(path, f'[{value}]')}] : []")


def _operations(mutation, named: dict, base: str, pointer: str, fold: bool) -> str:
    def cel(expression) -> str:  # params folded in (static), or read from the param object (outputs/vapparams.py)
        return expression.compiled if fold else expression.source

    value = vapcel.rewrite(cel(mutation.value), named)
    when = vapcel.rewrite(cel(mutation.when), named) if mutation.when is not None else "true"
    steps = _steps(mutation.path)
    if mutation.op == "default":
        ops = _default(base, pointer, steps, value)
    elif mutation.op == "append":
        ops = _append(base, pointer, steps, value)
    else:
        raise NotExportable(f"its op {mutation.op!r} has no JSON Patch here")
    return f"(({when}) ? ({ops}) : [])"


def expression(policy: Policy, mutation, named: dict, guard: str, fold: bool = True) -> str:
    """The JSON Patch expression of one mutation over every template (and container) of the object."""
    if mutation.target == "pod":
        per_template = _operations(mutation, named, "tpl.spec", "tpl.path", fold)
    else:
        sections = _SECTIONS.get(policy.containers)
        if sections is None:
            raise NotExportable(f"it mutates the containers of section {policy.containers!r}, which the walk does "
                                "not write")
        parts = []
        for section in sections:
            items = f"tpl.spec.{section}"
            pointer = f'tpl.path + {literal("/" + section + "/")} + string(ci)'
            inner = _operations(mutation, named, "container", pointer, fold)
            parts.append(f"(has({items}) ? lists.range(size({items})).map(ci, "
                         f"[{items}[ci]].map(container, {inner})[0]).flatten() : [])")
        per_template = " + ".join(parts)
    return f"!({guard}) ? [] : variables.templates.map(tpl, {per_template}).flatten()"


def policy_objects(policy: Policy, mutations: list, name: str, resource_rules: list, variables: list,
                   binding_resources: dict, version_name: str) -> list[dict]:
    """The MutatingAdmissionPolicy of the exported mutations [(name, expression)] and its binding."""
    labels = {"app.kubernetes.io/managed-by": "aiadmit"}
    return [
        {"apiVersion": GROUP, "kind": "MutatingAdmissionPolicy",
         "metadata": {"name": name, "labels": labels,
                      "annotations": {"aiadmit.dev/policy": policy.id,
                                      "aiadmit.dev/mutations": ",".join(n for n, _ in mutations),
                                      "aiadmit.dev/kubernetes-version": version_name}},
         "spec": {"failurePolicy": "Ignore", "reinvocationPolicy": "IfNeeded",
                  "matchConstraints": {"resourceRules": resource_rules},
                  "variables": variables,
                  "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": e}} for _, e in mutations]}},
        {"apiVersion": GROUP, "kind": "MutatingAdmissionPolicyBinding",
         "metadata": {"name": name, "labels": labels},
         "spec": {"policyName": name, "matchResources": binding_resources}},
    ]
