"""The config file: parameters, per-policy actions, classification, exceptions.

The same file drives the webhook, the audit and the fixer, so that an audit says
what the webhook would do. A given file extends the built-in defaults
(`default-config.yaml`): lists (excluded namespaces, exceptions) are added to,
maps are merged key by key; `inheritDefaults: false` starts from nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Optional

from webhook.cel.limits import Limits
from webhook.model import pointer as jp
from webhook.language.schemacheck import errors as schema_errors
from webhook.language.schemacheck import locate_error
from webhook.inputs.sources import load_text, read_text
from webhook.k8s.workload import Classification
from webhook.language.bundle import CONFIG_SCHEMA_FILE, DEFAULT_CONFIG_FILE
from webhook.language.checks import Checks
from webhook.model.valueclass import Compared, Frozen
from webhook.model.globs import any_matches



class ConfigError(Exception):
    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


class PolicyException(Frozen, Compared):
    name: str
    policies: tuple[str, ...]
    reason: str
    namespaces: tuple[str, ...] = ("*",)
    names: tuple[str, ...] = ("*",)
    kinds: tuple[str, ...] = ()
    expires: Optional[dt.date] = None

    def __init__(self, name: str, policies: tuple[str, ...], reason: str, namespaces: tuple[str, ...] = ("*",),
                 names: tuple[str, ...] = ("*",), kinds: tuple[str, ...] = (),
                 expires: Optional[dt.date] = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "policies", policies)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "namespaces", namespaces)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "kinds", kinds)
        object.__setattr__(self, "expires", expires)

    def _compared(self) -> tuple:
        """The fields `==` compares and the hash digests."""
        return (self.name, self.policies, self.reason, self.namespaces, self.names, self.kinds, self.expires)

    def covers_namespace(self, policy: str, namespace: str) -> bool:
        if "*" not in self.policies and policy not in self.policies:
            return False
        return any_matches(namespace, self.namespaces)

    def covers(self, policy: str, namespace: str, name: str, kind: str) -> bool:
        if "*" not in self.policies and policy not in self.policies:
            return False
        if self.kinds and kind not in self.kinds:
            return False
        return any_matches(namespace, self.namespaces) and any_matches(name, self.names)

    def expired(self, today: dt.date) -> bool:
        return self.expires is not None and today > self.expires


class PolicySettings(Frozen, Compared):
    enabled: bool = True
    action: Optional[str] = None
    params: Optional[dict] = None
    context_failure: Optional[str] = None

    def __init__(self, enabled: bool = True, action: Optional[str] = None, params: Optional[dict] = None,
                 context_failure: Optional[str] = None) -> None:
        object.__setattr__(self, "enabled", enabled)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "context_failure", context_failure)

    def _compared(self) -> tuple:
        """The fields `==` compares and the hash digests."""
        return (self.enabled, self.action, self.params, self.context_failure)


class Config(Compared):
    classification: Classification
    exclude_namespaces: tuple[str, ...] = ()
    enforcement_label: str = "aiadmit.dev/enforcement"
    exemption_annotation: str = "aiadmit.dev/exempt"
    annotation_exemptable: frozenset = frozenset()
    context_failure: str = "skip"
    trusted_controllers: tuple[str, ...] = ()  # userInfo.username globs (webhook only, see docs/webhook.md)
    policies: dict[str, PolicySettings]
    exceptions: tuple[PolicyException, ...] = ()
    # `inTree.skipExported`: the Kubernetes version whose exported policies the API server runs, or None
    in_tree: Optional[str] = None
    cel_limits: Limits  # the static CEL cost estimate's bounds (`celLimits`)
    source: str = "<defaults>"
    _excluded: dict

    def __init__(self, classification: Classification | None = None, exclude_namespaces: tuple[str, ...] = (),
                 enforcement_label: str = "aiadmit.dev/enforcement", exemption_annotation: str = "aiadmit.dev/exempt",
                 annotation_exemptable: frozenset = frozenset(), context_failure: str = "skip",
                 trusted_controllers: tuple[str, ...] = (), policies: dict[str, PolicySettings] | None = None,
                 exceptions: tuple[PolicyException, ...] = (), in_tree: Optional[str] = None,
                 cel_limits: Limits | None = None, source: str = "<defaults>", _excluded: dict | None = None) -> None:
        self.classification = Classification() if classification is None else classification
        self.exclude_namespaces = exclude_namespaces
        self.enforcement_label = enforcement_label
        self.exemption_annotation = exemption_annotation
        self.annotation_exemptable = annotation_exemptable
        self.context_failure = context_failure
        self.trusted_controllers = trusted_controllers
        self.policies = {} if policies is None else policies
        self.exceptions = exceptions
        self.in_tree = in_tree
        self.cel_limits = Limits() if cel_limits is None else cel_limits
        self.source = source
        self._excluded = {} if _excluded is None else _excluded

    def _compared(self) -> tuple:
        """The fields `==` compares."""
        return (self.classification, self.exclude_namespaces, self.enforcement_label, self.exemption_annotation,
                self.annotation_exemptable, self.context_failure, self.trusted_controllers, self.policies,
                self.exceptions, self.in_tree, self.cel_limits, self.source)

    __hash__ = None  # type: ignore[assignment]  # equal by value and mutable: no dict key

    def excluded(self, namespace: str) -> bool:
        found = self._excluded.get(namespace)
        if found is None:
            found = any_matches(namespace, self.exclude_namespaces)
            if len(self._excluded) < 65536:  # namespaces are few; the bound only guards against abuse
                self._excluded[namespace] = found
        return found

    def settings(self, policy_id: str) -> PolicySettings:
        return self.policies.get(policy_id) or PolicySettings()

    def place(self, key, default: Optional[str] = "") -> Optional[str]:
        """`file:line:col` of a policy's entry under `policies` (key: its id) or of a policy id an exception names
        (key: (exception name, id)); when not known, `default`, by default the file alone."""
        found = _PLACES.get(self.source, {}).get(key)
        return found if found else f"{self.source}:0:0" if default == "" else default

    def params(self) -> dict[str, dict]:
        found = Params({pid: s.params for pid, s in self.policies.items() if s.params})
        found.origins = _ORIGINS.get(self.source, {})
        return found


def _read(path: str, checks: Optional[Checks]) -> tuple[dict, list[str]]:
    text, error = read_text(path)  # regular files only: a FIFO would block the server's start
    if error is not None:
        return {}, [f"{path}:0:0: cannot read config: {error.message}"]
    loaded = load_text(text, path, templates=False)
    problems = [f"{e.file}:{e.line}:{e.column}: {e.message}" for e in loaded.errors + loaded.skipped]
    docs = [r for r in loaded.resources if r.kind == "Config"]
    if problems:
        return {}, problems
    if len(docs) != 1:
        return {}, [f"{path}:1:1: expected one document of kind Config (apiVersion aiadmit.dev/v1alpha1), "
                    f"found {len(docs)}"]
    resource = docs[0]
    for error in schema_errors(CONFIG_SCHEMA_FILE, resource.obj, text, str(resource.origin.document), checks):
        pointer, message = locate_error(error)
        line, column = resource.origin.position(pointer)
        problems.append(f"{path}:{line}:{column}: {jp.to_dotted(pointer) or '(document)'}: {message}")
    # where each policy's param override (and each element or value inside it) is written: its errors go there
    origins, places = {}, {}
    for pid, item in (resource.obj.get("policies") or {}).items() if isinstance(resource.obj.get("policies"), dict) \
            else ():
        line, column = resource.origin.position(jp.join("", "policies", pid))
        places[pid] = f"{path}:{line}:{column}"
        for name, value in ((item or {}).get("params") or {}).items() if isinstance(item, dict) else ():
            for steps in _paths(value, (name,)):
                line, column = resource.origin.position(jp.join("", "policies", pid, "params", *map(str, steps)))
                origins[(pid, *steps)] = f"{path}:{line}:{column}"
    # and where the user's exceptions name each policy (the defaults' name the bundle's, loaded or not)
    for index, item in enumerate(resource.obj.get("exceptions") or ()) \
            if isinstance(resource.obj.get("exceptions"), list) and path != DEFAULT_CONFIG_FILE else ():
        for position, pid in enumerate(item.get("policies") or () if isinstance(item, dict) else ()):
            line, column = resource.origin.position(jp.join("", "exceptions", str(index), "policies", str(position)))
            places[(item.get("name"), pid)] = f"{path}:{line}:{column}"
    _ORIGINS[path] = origins
    _PLACES[path] = places
    return resource.obj, problems


def _paths(value: object, path: tuple, budget: Optional[list] = None) -> list:
    """`path` and the path of every element or value inside `value` (list indexes, map keys), at most 10,000."""
    budget = [10_000] if budget is None else budget
    budget[0] -= 1
    out = [path]
    items = enumerate(value) if isinstance(value, list) else value.items() if isinstance(value, dict) else ()
    for key, inner in items:
        if budget[0] <= 0:
            break
        out += _paths(inner, path + (key,), budget)
    return out


_PLACES: dict[str, dict] = {}  # config file -> policy id (or (exception name, id)) -> "file:line:col" naming it
_ORIGINS: dict[str, dict] = {}  # config file -> (policy, param, index or key...) -> "file:line:col" of the override


class Params(dict):
    """The params each policy's config overrides, with where each is written (`origins`), for load errors."""

    origins: dict = {}


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if key in ("excludeNamespaces", "exceptions", "annotationExemptable", "trustedControllers") \
                and isinstance(value, list):
            out[key] = list(base.get(key) or []) + value
        elif key in ("classification", "policies") and isinstance(value, dict):
            merged = dict(base.get(key) or {})
            for name, item in value.items():
                if key == "policies" and isinstance(item, dict) and isinstance(merged.get(name), dict):
                    merged[name] = {**merged[name], **item}
                else:
                    merged[name] = item
            out[key] = merged
        else:
            out[key] = value
    return out


def load_config(path: Optional[str] = None, own_namespace: Optional[str] = None,
                checks: Optional[Checks] = None) -> Config:
    """The effective config: defaults, extended by `path` when given. Raises ConfigError with file:line."""
    data, problems = _read(DEFAULT_CONFIG_FILE, checks)
    if path:
        extra, extra_problems = _read(path, checks)
        problems += extra_problems
        if not problems:
            data = _merge(data, extra) if extra.get("inheritDefaults", True) else extra
    if problems:
        raise ConfigError(problems)
    return _build(data, path or DEFAULT_CONFIG_FILE, own_namespace)


def _build(data: dict, source: str, own_namespace: Optional[str]) -> Config:
    raw_class = data.get("classification") or {}
    defaults = Classification()
    classification = Classification(
        accelerators=tuple(raw_class.get("accelerators", defaults.accelerators)),
        device_classes=tuple(raw_class.get("acceleratorDeviceClasses", defaults.device_classes)),
        non_accelerators=tuple(raw_class.get("nonAccelerators", defaults.non_accelerators)),
        tier_label=raw_class.get("tierLabel", defaults.tier_label),
        role_label=raw_class.get("roleLabel", defaults.role_label),
        notebook_label=raw_class.get("notebookLabel", defaults.notebook_label),
        notebooks_are_untrusted=raw_class.get("notebooksAreUntrusted", defaults.notebooks_are_untrusted),
    )
    exceptions = []
    for raw in data.get("exceptions") or ():
        expires = dt.date.fromisoformat(raw["expires"]) if raw.get("expires") else None
        exceptions.append(PolicyException(
            name=raw["name"], policies=tuple(raw["policies"]), reason=raw["reason"].strip(),
            namespaces=tuple(raw.get("namespaces") or ("*",)), names=tuple(raw.get("names") or ("*",)),
            kinds=tuple(raw.get("kinds") or ()), expires=expires))
    policies = {
        pid: PolicySettings(enabled=raw.get("enabled", True), action=raw.get("action"), params=raw.get("params"),
                            context_failure=raw.get("contextFailure"))
        for pid, raw in (data.get("policies") or {}).items()
    }
    excluded = list(data.get("excludeNamespaces") or ())
    if own_namespace and own_namespace not in excluded:
        excluded.append(own_namespace)
    return Config(
        classification=classification,
        exclude_namespaces=tuple(excluded),
        enforcement_label=data.get("enforcementLabel", "aiadmit.dev/enforcement"),
        exemption_annotation=data.get("exemptionAnnotation", "aiadmit.dev/exempt"),
        annotation_exemptable=frozenset(data.get("annotationExemptable") or ()),
        context_failure=data.get("contextFailure", "skip"),
        trusted_controllers=tuple(data.get("trustedControllers") or ()),
        policies=policies,
        exceptions=tuple(exceptions),
        in_tree=((data.get("inTree") or {}).get("kubernetesVersion", "1.37")
                 if (data.get("inTree") or {}).get("skipExported") else None),
        cel_limits=Limits(max_object_bytes=(data.get("celLimits") or {}).get("maxObjectBytes", Limits.max_object_bytes),
                          per_expression=float((data.get("celLimits") or {}).get("costLimit",
                                                                                  Limits.per_expression))),
        source=source,
    )


def default_config_text() -> str:
    with open(DEFAULT_CONFIG_FILE, encoding="utf-8") as handle:
        return handle.read()

