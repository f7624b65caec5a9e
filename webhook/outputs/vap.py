"""`aiadmit export`: the policies as ValidatingAdmissionPolicies and their bindings, and what cannot be exported.

Why: a webhook is a network hop on every pod create and, failing closed, a way to stop a cluster; the API server
runs the same kind of CEL itself. Each rule that can run there becomes one `validation` of its policy's VAP (the
pod-template walk written in CEL, vapcel.py); every rule or mutation that cannot is listed with its reason, and
the webhook keeps it. Decisions (docs/cli.md, "export"):

- CREATE only: on an UPDATE the webhook denies only what the update newly offends (app/admission.py), which a
  VAP's `oldObject` could express only rule by rule; UPDATE stays the webhook's.
- Params are read through `paramRef` from a `PolicyParams` object export also writes (outputs/vapparams.py), so a
  config change changes only that object; `--format static` folds them in (a static policy holds without etcd).
- The namespace exclusions, the config's exact-namespace exceptions and the enforcement label (a ceiling) are
  binding selectors: one binding per action a namespace can lower the policy to.
- A trusted controller's create of an owned object is not matched (the webhook lowers those to warnings).
- failurePolicy Fail for a deny policy (an error denies, as the webhook fails closed), Ignore for warn and audit.
- A rule whose own action is below its policy's gets a second VAP, `aiadmit-<id>-at-<action>`: a binding's
  validationActions hold for all the validations of its policy.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Optional

from webhook.cel.portability import refusal
from webhook.k8s.kindnames import KINDS_FILE, table_data
from webhook.k8s.versions import KubernetesVersion
from webhook.language.config import Config
from webhook.language.policy import ACTION_RANK, Policy, Rule
from webhook.outputs import mapexport, vapcel, vapparams, vapvars
from webhook.outputs.vapcel import NotExportable, literal

GROUP = "admissionregistration.k8s.io/v1"
ACTIONS = {"deny": "Deny", "warn": "Warn", "audit": "Audit"}
STATIC_SUFFIX = ".static.k8s.io"
_EXPORTABLE_CLASSES = {"accelerated", "ai", "pod", "untrusted"}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass
class Exported:
    """One policy's export: the objects written, and each rule or mutation left to the webhook with its reason."""

    policy: Policy
    objects: list = field(default_factory=list)
    rules: list = field(default_factory=list)  # names of the rules exported
    kinds: list = field(default_factory=list)  # the (kind, group) pairs the exported rules cover
    left: list = field(default_factory=list)  # (rule or mutation name, reason); "*" for the whole policy
    mutating: list = field(default_factory=list)  # the MutatingAdmissionPolicy and binding (outputs/mapexport.py)
    mutations: list = field(default_factory=list)  # names of the mutations exported
    kinds_mutated: list = field(default_factory=list)
    params: list = field(default_factory=list)  # the PolicyParams object its policies read (outputs/vapparams.py)

    @property
    def whole(self) -> bool:
        return not self.left


def _kinds(policy: Policy, reads: set, pointers: bool = False) -> tuple[list, list, list]:
    """(resourceRules, [(kind, templates CEL)], [(kind, reason)]) for the kinds this policy can be exported for."""
    rules: dict[str, list] = {}
    walks, skipped = [], []
    for entry in table_data(KINDS_FILE)["kinds"]:
        kind, group = entry["kind"], entry.get("group", "")
        if not policy.match.admits_kind(kind):
            continue
        try:
            if "injected" in reads and any(t.get("injects") for t in entry["templates"]):
                raise NotExportable("its operator mounts or probes containers itself (kinds.yaml `injects`), "
                                    "which the policy reads")
            parts = [vapcel.template_items(t, pointers=pointers) for t in entry["templates"]]
        except NotExportable as exc:
            skipped.append((f"{kind}.{group}" if group else kind, str(exc)))
            continue
        resource = entry["kind"].lower() + "s"
        if resource not in rules.setdefault(group, []):
            rules[group].append(resource)
        walks.append((kind, group, " + ".join(parts)))
    resource_rules = [{"apiGroups": [g], "apiVersions": ["*"], "operations": ["CREATE"], "resources": r,
                       "scope": "*"} for g, r in rules.items()]
    return resource_rules, walks, skipped


def _containers(policy: Policy) -> str:
    main = "(has(tpl.spec.containers) ? tpl.spec.containers : [])"
    init = "(has(tpl.spec.initContainers) ? tpl.spec.initContainers : [])"
    if policy.containers == "containers":
        return main
    if policy.containers == "initContainers":
        return init
    if policy.containers == "all":
        return f"({main} + {init})"
    raise NotExportable(f"it checks the containers of section {policy.containers!r}, which the walk does not write")


def _cel(expression, fold: bool) -> str:
    """The expression's source with the params folded in (`fold`), or reading `params` (the param object)."""
    return expression.compiled if fold else expression.source


def _message(policy: Policy, rule: Rule, named: dict, fold: bool) -> str:
    """messageExpression of one finding, as the webhook words it: `<policy>: <message>`, whitespace collapsed."""
    pieces = [literal(policy.id + ": ")]
    for part in rule.message.parts:
        if isinstance(part, str):
            text = re.sub(r"\s+", " ", part)
            if text:
                pieces.append(literal(text))
            continue
        source = vapcel.rewrite(_cel(part, fold), named)
        kind = part.type
        if kind == "string":
            pieces.append(f"({source})")
        elif kind in ("int", "dyn"):
            pieces.append(f"string({source})")
        elif kind == ("list", "string"):
            pieces.append(f'({source}).join(", ")')
        else:
            shown = kind if isinstance(kind, str) else f"list of {kind[1]}"
            raise NotExportable(f"its message shows a {shown} value, which Kubernetes' string() renders otherwise "
                                "than aiadmit's message")
    return " + ".join(pieces)


def _validation(policy: Policy, rule: Rule, named: dict, version: KubernetesVersion, fold: bool) -> dict:
    found = _validation_of(policy, rule, named, fold)
    for key in ("expression", "messageExpression"):
        refused = refusal(found[key], version)
        if refused is not None:
            raise NotExportable(f"a Kubernetes {version} API server refuses it: {refused[0]}")
    return found


def _validation_of(policy: Policy, rule: Rule, named: dict, fold: bool) -> dict:
    if rule.schema is not None:
        raise NotExportable("it is a JSON Schema rule (an aiadmit extension)")
    if rule.requires:
        raise NotExportable(f"it needs cluster facts ({', '.join(sorted(rule.requires))})")
    extra = set(rule.classes) - _EXPORTABLE_CLASSES
    if extra:
        raise NotExportable(f"it applies by aiadmit's classification ({', '.join(sorted(extra))})")
    when = vapcel.rewrite(_cel(rule.when, fold), named) if rule.when is not None else "true"
    check = vapcel.rewrite(_cel(rule.expression, fold), named)
    holds = f"!({when}) || ({check})"
    failing = f"({when}) && !({check})"
    message = _message(policy, rule, named, fold)
    static = " ".join(("".join(p if isinstance(p, str) else "…" for p in rule.message.parts)).split())
    if rule.target == "object":
        expression, message_expression = holds, message
    elif rule.target == "pod":
        expression = f"variables.templates.all(tpl, {holds})"
        message_expression = f'variables.templates.filter(tpl, {failing}).map(tpl, {message}).join("; ")'
    else:
        containers = _containers(policy)
        expression = f"variables.templates.all(tpl, {containers}.all(container, {holds}))"
        message_expression = (f"variables.templates.map(tpl, {containers}.filter(container, {failing})"
                              f'.map(container, {message})).flatten().join("; ")')
    expression = f"!({vapvars.class_guard(policy, rule.classes)}) || ({expression})"
    return {"expression": expression, "messageExpression": message_expression,
            "message": f"{policy.id}: {static}"[:1024], "reason": "Forbidden"}


def _export_mutations(policy: Policy, config: Config, version: KubernetesVersion, result: Exported, named: dict,
                      name: str, action: str) -> None:
    """The policy's mutations as a MutatingAdmissionPolicy and binding (outputs/mapexport.py), into `result`."""
    def leave(why: str) -> None:
        result.left.extend((f"mutation {m.name}", why) for m in policy.mutations)

    if action == "audit":
        return leave("its policy's action is audit, which only observes (the webhook does not mutate either)")
    try:
        selectors = _bindings(policy, config, action, name, "")[0]["spec"]["matchResources"]
    except NotExportable as exc:
        return leave(str(exc))
    selectors = copy.deepcopy(selectors)
    expressions = selectors["namespaceSelector"]["matchExpressions"]
    expressions[1:] = [{"key": config.enforcement_label, "operator": "NotIn", "values": ["audit"]}]
    resource_rules, walks, _ = _kinds(policy, _read_names(policy), pointers=True)
    if not walks:
        return leave("no kind of the kinds table can be walked for it")
    guard = vapvars.class_guard(policy)
    done = []
    for mutation in policy.mutations:
        try:
            source = mapexport.expression(policy, mutation, named, guard, fold=name.endswith(STATIC_SUFFIX))
            refused = refusal(source, version)
            if refused is not None:
                raise NotExportable(f"a Kubernetes {version} API server refuses it: {refused[0]}")
        except NotExportable as exc:
            result.left.append((f"mutation {mutation.name}", str(exc)))
            continue
        done.append((mutation.name, source))
    if not done:
        return None
    if len(done) < len(policy.mutations):
        # a later mutation's `when` may read what an earlier one adds: the webhook applies them all, or here none
        result.left += [(f"mutation {n}", "another mutation of its policy cannot be exported, and mutations see each other's "
                            "changes") for n, _ in done]
        return None
    result.mutations = [n for n, _ in done]
    result.kinds_mutated = [(k, g) for k, g, _ in walks]
    result.mutating = mapexport.policy_objects(policy, done, name, resource_rules,
                                               vapvars.object_variables(walks, config), selectors, version.name)
    if vapparams.reads_params(*(source for _, source in done)):
        _read_params(policy, result, result.mutating[0]["spec"], result.mutating[1:])
    return None


def _exact(patterns, what: str) -> list[str]:
    for pattern in patterns:
        if any(c in pattern for c in "*?["):
            raise NotExportable(f"{what} {pattern!r} is a glob, which a namespace selector cannot say")
    return list(patterns)


def _bindings(policy: Policy, config: Config, action: str, name: str, end: str) -> list[dict]:
    """One binding per action the enforcement label can lower `action` to (a ceiling, never a raise)."""
    excluded = _exact(config.exclude_namespaces, "the excluded namespace")
    for exception in config.exceptions:
        if exception.policies and policy.id not in exception.policies and "*" not in exception.policies:
            continue
        if tuple(exception.names) != ("*",) or exception.kinds or exception.expires is not None:
            raise NotExportable(f"the config exception {exception.name!r} names objects, kinds or an expiry, "
                                "which a binding's selectors cannot say")
        excluded += _exact(exception.namespaces, f"exception {exception.name!r}'s namespace")
    if policy.match.namespaces or policy.match.exclude_namespaces:
        raise NotExportable("the policy names namespaces itself")
    if policy.id in (config.annotation_exemptable or ()):
        raise NotExportable("the config lets an annotation exempt objects from it")
    label = config.enforcement_label
    out = []
    lower = [a for a in ACTION_RANK if ACTION_RANK[a] < ACTION_RANK[action]]
    for each in [action] + sorted(lower, key=ACTION_RANK.get, reverse=True):
        below = [a for a in ACTION_RANK if ACTION_RANK[a] < ACTION_RANK[each]]
        expressions = [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": sorted(set(excluded))}]
        if each == action:
            if below:
                expressions.append({"key": label, "operator": "NotIn", "values": below})
        else:
            expressions.append({"key": label, "operator": "In", "values": [each]})
        resources = {"namespaceSelector": {"matchExpressions": expressions}}
        if policy.match.selector:
            resources["objectSelector"] = policy.match.selector
        suffix = "" if each == action else f"-{each}"
        out.append({"apiVersion": GROUP, "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": {"name": f"{name}{suffix}{end}",
                                 "labels": {"app.kubernetes.io/managed-by": "aiadmit"}},
                    "spec": {"policyName": name + end, "validationActions": [ACTIONS[each]],
                             "matchResources": resources}})
    return out


def export_policy(policy: Policy, config: Config, version: KubernetesVersion, static: bool = False) -> Exported:
    """The VAP, bindings and left-over list of one policy (the config's action for it, or the policy's)."""
    result = Exported(policy)
    action = config.settings(policy.id).action or policy.action
    extra = set(policy.match.classes) - _EXPORTABLE_CLASSES
    if policy.match.any_classes and not policy.match.any_classes <= _EXPORTABLE_CLASSES:
        extra |= set(policy.match.any_classes)
    if extra:
        why = ", ".join(sorted(extra))
        result.left += [(f"mutation {m.name}", "its policy applies by aiadmit's classification")
                        for m in policy.mutations]
        result.left.append(("*", f"it applies by aiadmit's classification ({why}): role, tier and notebook are "
                                 "read from the kinds table, labels and the namespace"))
        return result
    if not _NAME.match(policy.id):
        result.left.append(("*", "its id is not a Kubernetes object name"))
        return result
    named = {name: _cel(expression, static) for name, expression in policy.named.items()}
    name, end = f"aiadmit-{policy.id}", STATIC_SUFFIX if static else ""
    validations, reads = [], set()
    for rule in policy.rules:
        reads |= set(rule.variables)
    resource_rules, walks, skipped = _kinds(policy, _read_names(policy))
    if policy.mutations:
        _export_mutations(policy, config, version, result, named, name + end, action)
    by_action: dict[str, tuple[list, list]] = {}  # a rule's own lower action: a VAP of its own (one binding set)
    for rule in policy.rules:
        own = rule.action if rule.action and ACTION_RANK[rule.action] < ACTION_RANK[action] else action
        try:
            validation = _validation(policy, rule, named, version, static)
        except NotExportable as exc:
            result.left.append((rule.name, str(exc)))
            continue
        validations.append(validation)
        result.rules.append(rule.name)
        by_action.setdefault(own, ([], []))[0].append(validation)
        by_action[own][1].append(rule.name)
    if not validations or not walks:
        if not walks:
            result.left.append(("*", "no kind of the kinds table can be walked for it"))
        result.rules = []
        return result
    try:
        bindings = {each: _bindings(policy, config, each, _policy_name(name, action, each), end)
                    for each in by_action}
    except NotExportable as exc:
        result.left.append(("*", str(exc)))
        result.rules = []
        return result
    for kind, why in skipped:
        result.left.append((f"kind {kind}", why))
    result.kinds = [(k, g) for k, g, _ in walks]
    trusted = [u for u in config.trusted_controllers if not any(c in u for c in "*?[")]
    conditions = []
    if trusted:
        conditions = [{
            "name": "not-a-trusted-controllers-child",
            "expression": f"!(request.userInfo.username in {vapvars.cel_list(trusted)} && "
                          "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
                          "has(r.controller) && r.controller))"}]
    for each in sorted(by_action, key=ACTION_RANK.get, reverse=True):
        spec = {"failurePolicy": "Fail" if each == "deny" else "Ignore",
                "matchConstraints": {"resourceRules": resource_rules},
                "variables": vapvars.object_variables(walks, config),
                "validations": by_action[each][0]}
        if conditions:
            spec["matchConditions"] = conditions
        if vapparams.reads_params(*(v[k] for v in by_action[each][0] for k in ("expression", "messageExpression"))):
            _read_params(policy, result, spec, bindings[each])
        result.objects += [{"apiVersion": GROUP, "kind": "ValidatingAdmissionPolicy",
                            "metadata": {"name": _policy_name(name, action, each) + end,
                                         "labels": {"app.kubernetes.io/managed-by": "aiadmit"},
                                         "annotations": {"aiadmit.dev/policy": policy.id,
                                                         "aiadmit.dev/rules": ",".join(by_action[each][1]),
                                                         "aiadmit.dev/kubernetes-version": version.name}},
                            "spec": spec}] + bindings[each]
    return result


def _read_params(policy: Policy, result: Exported, spec: dict, bindings: list) -> None:
    """`spec` (a VAP's or MAP's) reads the policy's PolicyParams object, its `bindings` name it (vapparams.py)."""
    spec["paramKind"] = dict(vapparams.PARAM_KIND)
    for binding in bindings:
        binding["spec"]["paramRef"] = vapparams.binding_ref(policy.id)
    if not result.params:
        result.params = [vapparams.param_object(policy)]


def _policy_name(name: str, action: str, each: str) -> str:
    """The VAP of the policy's own action is `aiadmit-<id>`; the rules whose own action is lower (a warn rule of a
    deny policy) make `aiadmit-<id>-at-<action>`: a binding's validationActions hold for every validation."""
    return name if each == action else f"{name}-at-{each}"


def _read_names(policy: Policy) -> set:
    names = set(policy.variables)
    for expression in policy.named.values():
        names |= set(expression.variables)
    return names


def export(policies: list[Policy], config: Config, version: KubernetesVersion,
           static: bool = False) -> list[Exported]:
    """Every enabled policy's export, in id order."""
    return [export_policy(p, config, version, static) for p in sorted(policies, key=lambda p: p.id)
            if config.settings(p.id).enabled]
