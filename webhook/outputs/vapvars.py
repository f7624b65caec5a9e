"""The variables every exported policy shares: the pod templates of each kind, the containers, the devices and the
classes the engine decides before any rule runs (`accelerated`, `ai`, `untrusted`), written in CEL over `object`
and `namespaceObject` (outputs/vap.py, outputs/mapexport.py).

Why one module: a ValidatingAdmissionPolicy and a MutatingAdmissionPolicy of the same policy must classify an
object exactly as the engine does (webhook/k8s/workload.py), and as each other.
"""

from __future__ import annotations

from webhook.k8s.kindnames import KINDS_FILE, table_data
from webhook.k8s.workload import ROLES
from webhook.language.config import Config
from webhook.language.policy import Policy
from webhook.outputs import vapcel
from webhook.outputs.vapcel import literal


def walk_names(walks: list) -> list[str]:
    """One variable per kind (`pyTorchJobTemplates`; a second kind of the same name gets its group's index)."""
    names, seen = [], {}
    for kind, _, _ in walks:
        base = kind[0].lower() + kind[1:] + "Templates"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}{seen[base]}")
    return names


def _templates(walks: list) -> list[dict]:
    """The pod templates of the admitted object: a variable per kind (each compiled on its own, evaluated only for
    its kind: VAP variables are lazy), and `templates`, the one of the object's kind."""
    names = walk_names(walks)
    out = "[]"
    for (kind, group, _), name in reversed(list(zip(walks, names))):
        test = f'object.kind == {literal(kind)}'
        if group:
            test += f' && object.apiVersion.startsWith({literal(group + "/")})'
        else:
            test += ' && object.apiVersion == "v1"'
        out = f"{test} ? variables.{name} : {out}"
    return [{"name": name, "expression": walk} for (_, _, walk), name in zip(walks, names)] + \
        [{"name": "templates", "expression": out}]


def class_guard(policy: Policy, classes: frozenset = frozenset()) -> str:
    """CEL that holds where the engine applies the policy (and a rule of `classes`): it decides these first."""
    guards = [f"variables.{w}" for w in ("accelerated", "ai", "untrusted") if w in classes | policy.match.classes]
    wanted = sorted(policy.match.any_classes - {"pod"})
    if wanted and "pod" not in policy.match.any_classes:
        guards.append(f"({' || '.join('variables.' + w for w in wanted)})")
    return " && ".join(guards) or "true"


def object_variables(walks: list, config: Config) -> list[dict]:
    regex = vapcel.glob_regex(config.classification.accelerators)
    containers = ("variables.templates.map(tpl, (has(tpl.spec.containers) ? tpl.spec.containers : []) + "
                  "(has(tpl.spec.initContainers) ? tpl.spec.initContainers : [])).flatten()")
    devices = (f"variables.containers.map(c, has(c.resources) ? "
               f"(has(c.resources.limits) ? c.resources.limits.map(r, r) : []) + "
               f"(has(c.resources.requests) ? c.resources.requests.map(r, r) : []) : []).flatten()"
               f".filter(r, r.matches({literal(regex)})).distinct().sort()")  # sorted, as the engine binds it
    accelerated = ("size(variables.devices) > 0 || variables.templates.exists(tpl, "
                   "has(tpl.spec.resourceClaims) && size(tpl.spec.resourceClaims) > 0)")
    # `ai` as webhook/k8s/workload.py classifies: accelerated, a kind with a fixed role, the notebook label on the
    # object or a template, or the role label naming a role on a kind without one.
    fixed = [f"{k}.{g}" if g else k for k, g, role in _roles()]
    kind_group = 'object.kind + (object.apiVersion.contains("/") ? "." + object.apiVersion.split("/")[0] : "")'
    labels = "(has(object.metadata.labels) ? object.metadata.labels : {})"
    notebook = literal(config.classification.notebook_label)
    role = literal(config.classification.role_label)
    ai = (f"variables.accelerated || {kind_group} in {cel_list(fixed)} || {notebook} in {labels} || "
          f"variables.templates.exists(tpl, has(tpl.metadata.labels) && {notebook} in tpl.metadata.labels) || "
          f"({role} in {labels} && {labels}[{role}] in {cel_list(list(ROLES))})")
    # `untrusted` as workload.py's effective_tier: the tier label saying `untrusted` on the namespace, the object or
    # a template (a label may raise the namespace's tier, never lower it), or a notebook where notebooks are.
    tier = literal(config.classification.tier_label)
    notebook_kinds = [f"{k}.{g}" if g else k for k, g, r in _roles() if r == "notebook"]
    is_notebook = (f"{kind_group} in {cel_list(notebook_kinds)} || {notebook} in {labels} || "
                   f"variables.templates.exists(tpl, has(tpl.metadata.labels) && {notebook} in tpl.metadata.labels)")
    untrusted = (f"(namespaceObject != null && has(namespaceObject.metadata.labels) && "
                 f"{tier} in namespaceObject.metadata.labels && "
                 f"namespaceObject.metadata.labels[{tier}] == \"untrusted\") || "
                 f"({tier} in {labels} && {labels}[{tier}] == \"untrusted\") || "
                 f"variables.templates.exists(tpl, has(tpl.metadata.labels) && {tier} in tpl.metadata.labels && "
                 f"tpl.metadata.labels[{tier}] == \"untrusted\")")
    if config.classification.notebooks_are_untrusted:
        untrusted += f" || {is_notebook}"
    return _templates(walks) + [
            {"name": "containers", "expression": containers},
            {"name": "devices", "expression": devices},
            {"name": "accelerated", "expression": accelerated},
            {"name": "ai", "expression": ai},
            {"name": "untrusted", "expression": untrusted}]


def _roles() -> list:
    return [(e["kind"], e.get("group", ""), e["role"]) for e in table_data(KINDS_FILE)["kinds"] if e.get("role")]


def cel_list(values: list[str]) -> str:
    return "[" + ", ".join(literal(v) for v in values) + "]"
