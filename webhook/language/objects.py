"""Policies and exceptions as cluster objects (aiadmit.dev/v1alpha1 `Policy`, `PolicyException`).

A `Policy` object is the same document as a file in policies/; the API server adds metadata (uid,
resourceVersion, managedFields, annotations) and a `status`, which the language's schema does not know, so
the schema sees the document less those. Errors name the object and the line and column of its rendering
with sorted keys, without `status` (and managedFields, which kubectl hides): the layout of
`kubectl get policy NAME -o yaml` less its status block, so `Policy/team-label:14:17` is the line a person finds
there (for the fields sorted before `status`, which are all but summary, target, variables and why, in
kubectl's own output as it is).

A `PolicyException` is namespaced and covers only its own namespace: it has no field naming other
namespaces (the CRD's schema has none, and this check refuses one), because who may create it is RBAC's
decision per namespace (manifests/base/rbac.yaml, the approver ClusterRole): a tenant's exception never reaches
another tenant. It must name the policies it lifts (no `*`), why, and who asked; `expires` is optional.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from typing import Iterable, Optional

import yaml

from webhook.cel.limits import Limits
from webhook.inputs.sources import load_text
from webhook.language.checks import Checks
from webhook.language.config import PolicyException
from webhook.language.loader import compile_loaded
from webhook.language.policy import Policy
from webhook.model.resource import Resource
from webhook.model.yamlkeys import plain_is_text

GROUP, VERSION = "aiadmit.dev", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
POLICY_PLURAL, EXCEPTION_PLURAL = "policies", "policyexceptions"
_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_SPEC_FIELDS = {"policies", "match", "reason", "expires", "requestedBy"}
MAX_LIST = 64  # policies, names and kinds an exception may list (the CRD's maxItems)


def is_policy(obj: dict) -> bool:
    return isinstance(obj, dict) and obj.get("apiVersion") == API_VERSION and obj.get("kind") == "Policy"


def is_exception(obj: dict) -> bool:
    return isinstance(obj, dict) and obj.get("apiVersion") == API_VERSION and obj.get("kind") == "PolicyException"


def label(obj: dict) -> str:
    """How errors name an object: `Policy/NAME` or `PolicyException/NAMESPACE/NAME`."""
    meta = obj.get("metadata") or {}
    parts = [str(obj.get("kind")), *([str(meta["namespace"])] if meta.get("namespace") else []), str(meta.get("name"))]
    return "/".join(parts)


def render(obj: dict) -> str:
    """The stored object as `kubectl get -o yaml` prints it (sorted keys), less `status` and managedFields."""
    shown = {k: v for k, v in obj.items() if k != "status"}
    meta = dict(shown.get("metadata") or {})
    meta.pop("managedFields", None)
    shown["metadata"] = meta
    return yaml.dump(shown, Dumper=_KubectlDumper, sort_keys=True, default_flow_style=False, width=1 << 20,
                     allow_unicode=True)


class _KubectlDumper(yaml.SafeDumper):
    """Lines as sigs.k8s.io/yaml writes them: a string with a line break is a literal block (`|`), not quoted."""


def _string(dumper: yaml.SafeDumper, value: str):
    """Quoted where Kubernetes' reader would not read the plain text back as this string (`y`, `08`: go-yaml v2's
    rules, which the reader follows for keys), as go-yaml's own writer quotes it."""
    style = "|" if "\n" in value else None if plain_is_text(value) else "'"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_KubectlDumper.add_representer(str, _string)


def _loaded(obj: dict) -> tuple[str, str, "object"]:
    name, text = label(obj), render(obj)
    return name, text, load_text(text, name, templates=False)


def _schema_view(resource: Resource) -> dict:
    """The document as the policy language knows it: metadata is only the name and labels (no server fields)."""
    doc = dict(resource.obj)
    meta = doc.get("metadata") or {}
    doc["metadata"] = {k: copy.deepcopy(meta[k]) for k in ("name", "labels") if k in meta}
    return doc


def load_policy_object(obj: dict, params: Optional[dict] = None, checks: Optional[Checks] = None,
                       limits: Optional[Limits] = None) -> tuple[Optional[Policy], list[str]]:
    """The compiled policy of one `Policy` object, or None and every problem (`Policy/NAME:line:col: ...`)."""
    name, text, loaded = _loaded(obj)
    policies, problems = compile_loaded(loaded, params, checks, limits, texts={name: text}, prepare=_schema_view)
    if not problems and len(policies) != 1:
        problems = [f"{name}:1:1: expected one Policy document"]
    return (policies[0] if not problems else None), problems


def load_exception_object(obj: dict, known: Iterable[str],
                          resource: Optional[Resource] = None) -> tuple[Optional[PolicyException], list[str]]:
    """The exception of one `PolicyException` object, confined to its namespace, or None and every problem.

    `resource`: the object as read from a file (an audit's input): problems then name that file's lines."""
    if resource is None:
        name, text, loaded = _loaded(obj)
        problems = [f"{e.file}:{e.line}:{e.column}: {e.message}" for e in loaded.errors]
        if problems or len(loaded.resources) != 1:
            return None, problems or [f"{name}:1:1: expected one PolicyException document"]
        resource = loaded.resources[0]
    else:
        name, problems = resource.origin.file or label(obj), []

    def problem(pointer: str, message: str) -> None:
        line, column = resource.origin.position(pointer)
        field = pointer.strip("/").replace("/", ".") or "(document)"
        problems.append(f"{name}:{line}:{column}: {field}: {message}")

    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    if not namespace:
        problem("/metadata", "a PolicyException is namespaced: it covers only its own namespace")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        problem("/spec", "required: policies, reason, requestedBy")
        return None, problems
    for extra in sorted(set(spec) - _SPEC_FIELDS):
        problem(f"/spec/{extra}", f"unknown field (known: {', '.join(sorted(_SPEC_FIELDS))})"
                + ("; an exception covers only its own namespace" if extra == "namespaces" else ""))
    known = set(known)
    policies = spec.get("policies")
    if not isinstance(policies, list) or not policies or len(policies) > MAX_LIST:
        problem("/spec/policies", f"a list of 1 to {MAX_LIST} policy ids (no '*': name what is lifted)")
        policies = []
    for index, pid in enumerate(policies):
        if not isinstance(pid, str) or not _ID.match(pid):
            problem(f"/spec/policies/{index}", f"not a policy id: {pid!r}")
        elif pid not in known:
            problem(f"/spec/policies/{index}", f"unknown policy {pid!r}")
    for key in ("reason", "requestedBy"):
        value = spec.get(key)
        if not isinstance(value, str) or not value.strip() or len(value) > 1024:
            problem(f"/spec/{key}", "required: a non-empty string of at most 1024 characters")
    expires = None
    if spec.get("expires") is not None:
        try:
            expires = dt.date.fromisoformat(str(spec["expires"]))
        except ValueError:
            problem("/spec/expires", f"not a date (YYYY-MM-DD): {spec['expires']!r}")
    match = spec.get("match") if spec.get("match") is not None else {}
    if not isinstance(match, dict):
        problem("/spec/match", "an object with `names` and `kinds`")
        match = {}
    for extra in sorted(set(match) - {"names", "kinds"}):
        problem(f"/spec/match/{extra}", "unknown field (known: kinds, names)"
                + ("; an exception covers only its own namespace" if extra == "namespaces" else ""))
    lists = {}
    for key, pattern in (("names", re.compile(r"^[a-z0-9*?.-]{1,253}$")), ("kinds", _KIND)):
        value = match.get(key) if match.get(key) is not None else []
        if not isinstance(value, list) or len(value) > MAX_LIST:
            problem(f"/spec/match/{key}", f"a list of at most {MAX_LIST} strings")
            value = []
        for index, item in enumerate(value):
            if not isinstance(item, str) or not pattern.match(item):
                problem(f"/spec/match/{key}/{index}", f"not a {key[:-1]}{' (glob)' if key == 'names' else ''}: "
                                                      f"{item!r}")
        lists[key] = tuple(value)
    if problems:
        return None, problems
    return PolicyException(name=f"{namespace}/{meta.get('name')}", policies=tuple(policies),
                           reason=spec["reason"].strip(), namespaces=(namespace,),
                           names=lists["names"] or ("*",), kinds=lists["kinds"], expires=expires), []
