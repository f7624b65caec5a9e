"""The exported policies' params as objects the API server reads through `paramRef`: one `PolicyParams` per policy
(cluster-scoped, `aiadmit-<policy id>`, the params in `spec`), and the CustomResourceDefinition of that kind.

Why a CRD and not a ConfigMap: a ConfigMap holds strings only, and most of aiadmit's params are lists (device
environment variables, annotation and label names); the expressions would have to split and convert strings, and a
mistyped value would surface as an evaluation error on some later pod create. A CRD whose schema gives each param
its type makes the API server refuse a mistyped value when it is written (`kubectl apply` fails), and gives the
policy's type check real types. It is also how the Kubernetes documentation's ValidatingAdmissionPolicy examples
bind params. The schema is written from the exported policies themselves, so a user's own policy's params are
typed too. Cluster-scoped: the policies are cluster-wide, and a namespaced param object would let a namespace's
writers (not only the platform team) change what is enforced.

Decisions (docs/cli.md, "export"):
- `parameterNotFoundAction: Deny`: a missing param object is a failure decided by the policy's `failurePolicy`
  (Fail for a deny policy: the create is denied, as the webhook fails closed); never a silent pass.
- `--format static` folds the params in, as before: a static policy must hold while etcd is down, and a param object
  lives in etcd.
- A param read by two policies with different types gets no type in the schema (any value), rather than one
  policy's type refusing the other's value.
"""

from __future__ import annotations

from webhook.cel.lexer import tokenize

GROUP = "aiadmit.dev"
VERSION = "v1alpha1"
KIND = "PolicyParams"
PLURAL = "policyparams"
PARAM_KIND = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}
_LABELS = {"app.kubernetes.io/managed-by": "aiadmit"}
_ANY = {"x-kubernetes-preserve-unknown-fields": True}


def name(policy_id: str) -> str:
    return f"aiadmit-{policy_id}"


def reads_params(*sources: str) -> bool:
    """Whether any of these (exported) CEL sources reads `params` (an identifier, not a field named so)."""
    for source in sources:
        tokens = tokenize(source)
        for at, (kind, value, _) in enumerate(tokens):
            if kind == "ident" and value == "params" and not (at and tokens[at - 1][:2] == ("op", ".")):
                return True
    return False


def binding_ref(policy_id: str) -> dict:
    return {"name": name(policy_id), "parameterNotFoundAction": "Deny"}


def param_object(policy) -> dict:
    """The policy's params as its config leaves them (the config's values over the policy's defaults)."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": name(policy.id), "labels": dict(_LABELS),
                         "annotations": {"aiadmit.dev/policy": policy.id}},
            "spec": dict(policy.params)}


def _schema(value, default=None) -> dict:
    """The structural schema of one param value (`default`: the policy's own value, for an empty list's items)."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        sample = value or (default if isinstance(default, list) else [])
        items = {_key(_schema(v)): _schema(v) for v in sample}
        return {"type": "array", "items": next(iter(items.values())) if len(items) == 1 else dict(_ANY)}
    if isinstance(value, dict):
        values = {_key(_schema(v)): _schema(v) for v in value.values()}
        if len(values) == 1:
            return {"type": "object", "additionalProperties": next(iter(values.values()))}
        return {"type": "object", **_ANY}
    return dict(_ANY)


def _key(schema: dict) -> str:
    return repr(sorted(schema.items()))


def crd(policies: list) -> dict:
    """The CustomResourceDefinition of `PolicyParams`, its `spec` typed from the params of `policies`."""
    properties: dict = {}
    for policy in sorted(policies, key=lambda p: p.id):
        defaults = policy.document.get("params") or {}
        for param, value in sorted(policy.params.items()):
            schema = _schema(value, defaults.get(param))
            if param in properties and _key(properties[param]) != _key(schema):
                schema = dict(_ANY)
            properties[param] = schema
    spec = {"type": "object", "properties": properties}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{PLURAL}.{GROUP}",
                         "labels": {**_LABELS, "app.kubernetes.io/part-of": "aiadmit"}},  # as base/crds.yaml
            "spec": {"group": GROUP, "scope": "Cluster",
                     "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": "policyparams"},
                     "versions": [{"name": VERSION, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "description": "The params of one exported aiadmit policy, read by its "
                                                      "ValidatingAdmissionPolicy through paramRef (aiadmit export).",
                                       "properties": {"apiVersion": {"type": "string"},
                                                      "kind": {"type": "string"},
                                                      "metadata": {"type": "object"},
                                                      "spec": spec},
                                       "required": ["spec"]}}}]}}
