"""`aiadmit audit --cluster`: what runs in a live cluster, checked by the same engine.

One pass, read only: API discovery says which of the kinds we understand are
served (core and apps kinds always; an AI kind only when its CRD is installed),
each is listed with pagination (`limit`/`continue`, so a 50,000-pod cluster is
never one response), and the cluster facts policies need (namespace labels,
ResourceQuotas, PriorityClasses, RuntimeClasses, HPA targets) come from one
listing each, fed to `OfflineFacts` like the documents of a file audit.

Objects a listed controller owns (a Deployment's ReplicaSets and their Pods,
a Job's Pods) are skipped by default: their findings belong to the object a
person edits, and the webhook already judged the template. `include_owned`
keeps them.

Findings carry cluster coordinates: `Origin(cluster=<context>)`, no file or
line; the reports print context, kind, namespace/name and field instead.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Optional

from webhook.app.audit import AuditResult, audit_resources
from webhook.engine.core import Engine
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Origin, Resource
from webhook.k8s.workload import kind_table

PAGE_SIZE = 500
# (group, kind) of the objects the cluster facts come from; HPAs and KEDA ScaledObjects are also audited
# (inference-autoscaling).
FACT_KINDS = (("", "Namespace"), ("", "ResourceQuota"), ("scheduling.k8s.io", "PriorityClass"),
              ("node.k8s.io", "RuntimeClass"), ("autoscaling", "HorizontalPodAutoscaler"), ("keda.sh", "ScaledObject"),
              ("", "Node"), ("kueue.x-k8s.io", "LocalQueue"), ("scheduling.k8s.io", "PodGroup"),
              ("resource.k8s.io", "ResourceClaim"), ("resource.k8s.io", "ResourceClaimTemplate"),
              ("resource.k8s.io", "DeviceClass"))
# The report APIs `--apply-reports` writes: apiVersion -> (namespaced plural, cluster-scoped plural).
REPORT_APIS = {"wgpolicyk8s.io/v1alpha2": ("policyreports", "clusterpolicyreports"),
               "openreports.io/v1alpha1": ("reports", "clusterreports")}
POLICY_REPORT_API = "wgpolicyk8s.io/v1alpha2"
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=aiadmit"


class ClusterError(Exception):
    """The cluster could not be read (no kubeconfig, unreachable, forbidden): one line for the user."""


@dataclass(frozen=True)
class ApiResource:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: Optional[str] = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"


class Progress:
    """A one-line counter on stderr while listing, only when stderr is a terminal."""

    def __init__(self, stream=None, enabled: Optional[bool] = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total = 0

    def update(self, what: str, count: int) -> None:
        self.total += count
        if self.enabled:
            self.stream.write(f"\r\033[Klisting {what}: {self.total} objects read")
            self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write(f"\r\033[K{self.total} objects read\n")
            self.stream.flush()


def connect(context: Optional[str] = None, kubeconfig: Optional[str] = None):
    """(ApiClient, context name, the context's default namespace) from a kubeconfig, else in-cluster config."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c["name"] == context), None) if context else active
        if chosen is None:
            names = ", ".join(c["name"] for c in contexts)
            raise ClusterError(f"context {context!r} is not in the kubeconfig (contexts: {names})")
        api = config.new_client_from_config(config_file=kubeconfig, context=chosen["name"])
        return api, chosen["name"], chosen.get("context", {}).get("namespace") or "default"
    except (ConfigException, FileNotFoundError) as exc:
        if context or kubeconfig:
            raise ClusterError(f"kubeconfig: {exc}") from None
        try:
            config.load_incluster_config()
        except ConfigException:
            raise ClusterError(f"no kubeconfig and not running in a cluster: {exc}") from None
        return client.ApiClient(), "in-cluster", "default"


def _get(api, path: str, query: Optional[list] = None) -> dict:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        headers = {"Accept": "application/json"}
        if hasattr(api, "param_serialize"):  # kubernetes >= 33 (the OpenAPI generator's new client)
            method, url, headers, body, post = api.param_serialize("GET", path, query_params=query or [],
                                                                   header_params=headers,
                                                                   auth_settings=["BearerToken"])
            response = api.call_api(method, url, header_params=headers, body=body, post_params=post)
            response.read()
            if not 200 <= response.status < 300:  # this client raises only when deserialising
                try:
                    reason = json.loads(response.data).get("message") or response.reason
                except (TypeError, ValueError, AttributeError):
                    reason = response.reason
                raise ClusterError(f"GET {path}: {response.status} {reason}")
        else:  # pragma: no cover - older clients
            response = api.call_api(path, "GET", query_params=query or [], header_params=headers,
                                    auth_settings=["BearerToken"], _preload_content=False,
                                    _return_http_data_only=True)
        return json.loads(response.data)
    except ApiException as exc:
        reason = exc.reason
        try:
            reason = json.loads(exc.body).get("message", reason)
        except (TypeError, ValueError, AttributeError):
            pass
        raise ClusterError(f"GET {path}: {exc.status} {reason}") from None
    except (HTTPError, OSError) as exc:
        raise ClusterError(f"GET {path}: {exc}") from None


def discover(api, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], ApiResource]:
    """The served (group, kind)s among `wanted`, at each group's preferred version."""
    groups: dict[str, str] = {"": "v1"}
    for group in _get(api, "/apis").get("groups", []):
        preferred = (group.get("preferredVersion") or {}).get("version")
        if preferred:
            groups[group["name"]] = preferred
    found = {}
    for group in sorted({g for g, _ in wanted}):
        if group not in groups:
            continue  # CRD (or API) not installed: nothing of that kind can run
        version = groups[group]
        listing = _get(api, f"/apis/{group}/{version}" if group else "/api/v1")
        for entry in listing.get("resources", []):
            if "/" in entry["name"] or "list" not in entry.get("verbs", []):
                continue  # subresources (pods/log) and unlistable
            key = (group, entry["kind"])
            if key in wanted:
                found[key] = ApiResource(group, version, entry["kind"], entry["name"], entry["namespaced"])
    return found


def list_objects(api, resource: ApiResource, namespace: Optional[str] = None, page_size: int = PAGE_SIZE,
                 progress: Optional[Progress] = None) -> Iterator[dict]:
    """Every object of one kind, page by page; items get their apiVersion and kind back (lists omit them)."""
    token = None
    while True:
        query = [("limit", page_size)] + ([("continue", token)] if token else [])
        page = _get(api, resource.path(namespace), query)
        items = page.get("items") or []
        if progress is not None:
            progress.update(resource.plural, len(items))
        for item in items:
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
            yield item
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return


class ListedFacts(OfflineFacts):
    """OfflineFacts from complete listings: an empty RuntimeClass or PriorityClass list means none exist, and a
    namespace not listed is unknown (judged at the strictest tier)."""

    complete = True

    def priority_classes(self):
        return super().priority_classes() or {}

    def runtime_classes(self):
        return super().runtime_classes() or []

    def nodes(self):
        return super().nodes() or {}

    def local_queues(self, namespace):
        found = super().local_queues(namespace)
        return [] if found is None else found

    def pod_groups(self, namespace):
        found = super().pod_groups(namespace)
        return {} if found is None else found

    def extended_resources(self):
        return super().extended_resources() or {}  # every DeviceClass was listed: none names one


def audited_kinds(engine: Engine) -> set[tuple[str, str]]:
    """Every pod-bearing kind of the kinds table, plus kinds a policy names in `match.kinds`."""
    wanted = set(kind_table())
    named = {kind for policy in engine.policies for kind in policy.match.kinds}
    wanted |= {key for key in FACT_KINDS if key[1] in named}
    return wanted


def _owned_by_listed(obj: dict, listed_kinds: set[str]) -> bool:
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if owner.get("controller") and owner.get("kind") in listed_kinds:
            return True
    return False


@dataclass
class ClusterInput:
    context: str
    resources: list[Resource] = field(default_factory=list)  # what is audited
    facts: Optional[OfflineFacts] = None
    namespaces: Optional[list[str]] = None  # None: all
    kinds: list[str] = field(default_factory=list)


def read_cluster(api, context: str, engine: Engine, namespaces: Optional[list[str]] = None,
                 include_owned: bool = False, page_size: int = PAGE_SIZE,
                 progress: Optional[Progress] = None) -> ClusterInput:
    wanted = audited_kinds(engine)
    served = discover(api, wanted | set(FACT_KINDS))
    scopes: list[Optional[str]] = list(namespaces) if namespaces else [None]
    out = ClusterInput(context=context, namespaces=namespaces)
    fact_resources: list[Resource] = []
    for key in FACT_KINDS:
        if key not in served:
            continue
        resource = served[key]
        for scope in (scopes if resource.namespaced else [None]):
            for obj in list_objects(api, resource, scope, page_size, progress):
                if resource.kind == "Namespace" and namespaces and obj["metadata"]["name"] not in namespaces:
                    continue
                fact_resources.append(Resource(obj, Origin(cluster=context)))
    audited = [served[key] for key in sorted(wanted) if key in served]
    out.kinds = [r.kind for r in audited]
    listed_kinds = {r.kind for r in audited}
    for resource in audited:
        if resource.kind in {k for _, k in FACT_KINDS}:
            out.resources += [r for r in fact_resources if r.kind == resource.kind]
            continue
        for scope in (scopes if resource.namespaced else [None]):
            for obj in list_objects(api, resource, scope, page_size, progress):
                if not include_owned and _owned_by_listed(obj, listed_kinds):
                    continue
                out.resources.append(Resource(obj, Origin(cluster=context)))
    if progress is not None:
        progress.done()
    out.facts = ListedFacts(fact_resources + out.resources)
    return out


def audit_cluster(engine: Engine, api, context: str, namespaces: Optional[list[str]] = None,
                  include_owned: bool = False, policies: Optional[set] = None, skip: Optional[set] = None,
                  page_size: int = PAGE_SIZE, progress: Optional[Progress] = None, jobs: int = 1) -> AuditResult:
    listed = read_cluster(api, context, engine, namespaces, include_owned, page_size, progress)
    return audit_resources(engine, listed.resources, facts=listed.facts, policies=policies, skip=skip, jobs=jobs)


def apply_reports(api, reports: Iterable[dict], namespaces: Optional[list[str]] = None,
                  log: Callable[[str], None] = lambda _: None, api_version: str = POLICY_REPORT_API) -> list[str]:
    """Create or replace each report, then delete aiadmit's stale reports of `api_version` in the audited scope.

    `api_version` is one of REPORT_APIS (wgpolicyk8s.io PolicyReports or OpenReports); every report must be of it.
    Returns problems (one line each); an empty list means every report is in the cluster.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(api)
    group, version = api_version.split("/")
    plurals = REPORT_APIS[api_version]
    problems: list[str] = []
    written: set[tuple[str, str, str]] = set()
    for report in reports:
        if report.get("apiVersion") != api_version:
            raise ValueError(f"{report.get('kind')} of {report.get('apiVersion')} given to apply {api_version}")
        namespace = report["metadata"].get("namespace")
        plural = plurals[0] if namespace else plurals[1]
        name = report["metadata"]["name"]
        scope = (namespace,) if namespace else ()
        get = custom.get_namespaced_custom_object if namespace else custom.get_cluster_custom_object
        try:
            try:
                current = get(group, version, *scope, plural, name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                current = None
            if current is None:
                create = custom.create_namespaced_custom_object if namespace else custom.create_cluster_custom_object
                create(group, version, *scope, plural, report)
                log(f"created {report['kind']} {namespace + '/' if namespace else ''}{name}")
            else:
                body = dict(report, metadata=dict(report["metadata"],
                                                  resourceVersion=current["metadata"]["resourceVersion"]))
                replace = (custom.replace_namespaced_custom_object if namespace
                           else custom.replace_cluster_custom_object)
                replace(group, version, *scope, plural, name, body)
                log(f"replaced {report['kind']} {namespace + '/' if namespace else ''}{name}")
            written.add((plural, namespace or "", name))
        except ApiException as exc:
            hint = f" (is the {group} {report['kind']} CRD installed?)" if exc.status == 404 else ""
            problems.append(f"{report['kind']} {namespace + '/' if namespace else ''}{name}: "
                            f"{exc.status} {exc.reason}{hint}")
    problems += _delete_stale(custom, group, version, plurals, written, namespaces, log)
    return problems


def _delete_stale(custom, group: str, version: str, plurals: tuple[str, str], written: set,
                  namespaces: Optional[list[str]], log) -> list[str]:
    """Reports aiadmit wrote earlier for the same scope that this run no longer produces (a fixed namespace)."""
    from kubernetes.client.exceptions import ApiException

    namespaced, cluster_scoped = plurals
    problems = []
    try:
        if namespaces:
            found = [item for ns in namespaces for item in custom.list_namespaced_custom_object(
                group, version, ns, namespaced, label_selector=MANAGED_SELECTOR)["items"]]
        else:
            found = custom.list_cluster_custom_object(group, version, namespaced,
                                                      label_selector=MANAGED_SELECTOR)["items"]
            found += custom.list_cluster_custom_object(group, version, cluster_scoped,
                                                       label_selector=MANAGED_SELECTOR)["items"]
    except ApiException as exc:
        return [] if exc.status == 404 else [f"listing old reports: {exc.status} {exc.reason}"]
    for item in found:
        namespace = item["metadata"].get("namespace") or ""
        plural = namespaced if namespace else cluster_scoped
        name = item["metadata"]["name"]
        if (plural, namespace, name) in written:
            continue
        try:
            if namespace:
                custom.delete_namespaced_custom_object(group, version, namespace, plural, name)
            else:
                custom.delete_cluster_custom_object(group, version, plural, name)
            log(f"deleted stale {item.get('kind', plural)} {namespace + '/' if namespace else ''}{name}")
        except ApiException as exc:
            if exc.status != 404:
                problems.append(f"deleting {namespace}/{name}: {exc.status} {exc.reason}")
    return problems
