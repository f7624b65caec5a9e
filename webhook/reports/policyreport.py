"""`--format policyreport`: `wgpolicyk8s.io/v1alpha2` PolicyReport / ClusterPolicyReport objects.

The shape Kyverno writes and Policy Reporter reads: one PolicyReport per
namespace (a ClusterPolicyReport for cluster-scoped objects), a result per
resource and policy (`pass` for a policy that applied and found nothing; per
rule and field for the rest), `source: aiadmit`, and a summary of counts.

Every object stays under etcd's request limit (1.5 MiB): results are packed
into reports of at most `max_bytes` of JSON (`aiadmit-<ns>`, `aiadmit-<ns>-2`,
...). A namespace that would need more than `max_reports` objects is
summarised instead: its summary keeps every count, passes are dropped first,
then the least severe results, and an annotation says how many were left out.
Report floods have taken API servers down; an audit must never be the cause.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from typing import Optional


from .jsonreport import Encoded, dump

API_VERSION = "wgpolicyk8s.io/v1alpha2"
MANAGED_BY = {"app.kubernetes.io/managed-by": "aiadmit"}
OMITTED_ANNOTATION = "aiadmit.dev/omitted-results"
ETCD_LIMIT = 1_572_864  # bytes: etcd's default --max-request-bytes
DEFAULT_MAX_BYTES = 1_000_000  # leaves room for metadata and managedFields the API server adds
DEFAULT_MAX_REPORTS = 10
SEVERITY = {"deny": "high", "warn": "medium", "audit": "low"}
# Kinds without a namespace; anything else read from a file without one lands in "default", like kubectl apply.
CLUSTER_SCOPED = frozenset({
    "Namespace", "Node", "PersistentVolume", "StorageClass", "PriorityClass", "RuntimeClass", "ClusterRole",
    "ClusterRoleBinding", "CustomResourceDefinition", "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
    "ClusterServingRuntime", "ClusterStorageContainer", "ClusterTrainingRuntime", "ClusterQueue", "ResourceFlavor",
    "Cohort", "DeviceClass", "ResourceSlice", "IngressClass", "ClusterPolicyReport",
})
_RANK = {"error": 0, "fail": 1, "warn": 2, "skip": 3, "pass": 4}


def report_namespace(resource) -> Optional[str]:
    """The namespace whose PolicyReport holds this resource's results; None for the ClusterPolicyReport."""
    if resource.namespace:
        return resource.namespace
    if resource.origin.cluster is not None or resource.kind in CLUSTER_SCOPED:
        return None
    return "default"


def _resource_ref(resource) -> dict:
    ref = {"apiVersion": resource.api_version, "kind": resource.kind, "name": resource.name}
    namespace = report_namespace(resource)
    if namespace:
        ref["namespace"] = namespace
    uid = resource.metadata.get("uid")
    if uid:
        ref["uid"] = str(uid)
    return ref


def _result(policy_id: str, status: str, resource, stamp: dict, message: str = "", rule: str = "",
            action: str = "", properties: Optional[dict] = None) -> dict:
    entry = {"source": "aiadmit", "policy": policy_id}
    if rule:
        entry["rule"] = rule
    entry.update({"result": status, "scored": True, "timestamp": dict(stamp), "resources": [_resource_ref(resource)]})
    if message:
        entry["message"] = message
    if action:
        entry["severity"] = SEVERITY[action]
    if properties:
        entry["properties"] = {k: str(v) for k, v in properties.items() if v not in (None, "")}
    return entry


def results_for(evaluation, stamp: dict) -> list[dict]:
    resource = evaluation.resource
    out = []
    with_findings = set()
    for finding in evaluation.findings:
        with_findings.add(finding.policy)
        if finding.result == "fail":
            status = "warn" if finding.action == "warn" else "fail"
        else:
            status = finding.result  # skip | error
        line, column = finding.position() if resource.origin.located else (0, 0)
        out.append(_result(finding.policy, status, resource, stamp, finding.message, finding.rule, finding.action, {
            "action": finding.action, "path": finding.pointer,
            "file": resource.origin.file if resource.origin.cluster is None else None,
            "line": line or None, "column": column or None}))
    for policy_id in evaluation.policies:
        if policy_id not in with_findings:
            out.append(_result(policy_id, "pass", resource, stamp))
    return out


def _summary(results: list[dict]) -> dict:
    counts = {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    for entry in results:
        counts[entry["result"]] += 1
    return counts


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _encode(results: list[dict]) -> list[str]:
    return [_COMPACT(entry) for entry in results]


def _pack(texts: list[str], max_bytes: int) -> list[range]:
    """Consecutive runs of results (by index) whose JSON stays within `max_bytes` each."""
    chunks: list[range] = []
    start = size = 0
    for index, text in enumerate(texts):
        entry_size = (len(text) if text.isascii() else len(text.encode("utf-8"))) + 1
        if index > start and size + entry_size > max_bytes:
            chunks.append(range(start, index))
            start, size = index, 0
        size += entry_size
    chunks.append(range(start, len(texts)))
    return chunks


def build_reports(result, engine=None, max_bytes: int = DEFAULT_MAX_BYTES, max_reports: int = DEFAULT_MAX_REPORTS,
                  now: Optional[float] = None) -> list[dict]:
    """PolicyReport and ClusterPolicyReport objects for an audit result, each within `max_bytes` of results."""
    return [report for report, _ in _build(result, max_bytes, max_reports, now)]


def _build(result, max_bytes: int, max_reports: int, now: Optional[float]) -> list[tuple[dict, list[str]]]:
    """The reports, each with its results already encoded as compact JSON (measured once, written as they are)."""
    now = time.time() if now is None else now
    stamp = {"seconds": int(now), "nanos": 0}
    by_namespace: dict[Optional[str], list[dict]] = defaultdict(list)
    for evaluation in result.evaluations:
        if evaluation.policies or evaluation.findings:
            by_namespace[report_namespace(evaluation.resource)].extend(results_for(evaluation, stamp))
    reports = []
    for namespace in sorted(by_namespace, key=lambda n: (n is not None, n or "")):
        results = by_namespace[namespace]
        texts = _encode(results)
        chunks = _pack(texts, max_bytes)
        omitted: list[dict] = []
        if len(chunks) > max_reports:
            order = sorted(range(len(results)), key=lambda i: _RANK[results[i]["result"]])
            ordered, ordered_texts = [results[i] for i in order], [texts[i] for i in order]
            keep = _pack(ordered_texts, max_bytes)[max_reports - 1].stop
            results, texts, omitted = ordered[:keep], ordered_texts[:keep], ordered[keep:]
            chunks = _pack(texts, max_bytes)
        base = f"aiadmit-{namespace}" if namespace else "aiadmit-cluster"
        for position, span in enumerate(chunks):
            chunk = results[span.start:span.stop]
            metadata: dict = {"name": base if position == 0 else f"{base}-{position + 1}"}
            if namespace:
                metadata["namespace"] = namespace
            metadata["labels"] = dict(MANAGED_BY)
            counts = _summary(chunk)
            if omitted and position == 0:
                metadata["annotations"] = {OMITTED_ANNOTATION: str(len(omitted))}
                for key, value in _summary(omitted).items():  # summarised: the counts stay whole
                    counts[key] += value
            reports.append(({
                "apiVersion": API_VERSION,
                "kind": "PolicyReport" if namespace else "ClusterPolicyReport",
                "metadata": metadata,
                "summary": counts,  # summed over a namespace's reports: every result counted once
                "results": chunk,
            }, texts[span.start:span.stop]))
    return reports


def render(result, engine, max_bytes: int = DEFAULT_MAX_BYTES, max_reports: int = DEFAULT_MAX_REPORTS,
           now: Optional[float] = None, **options) -> str:
    # A YAML stream of JSON documents (JSON is YAML; `kubectl apply -f` takes it), one result per line, each the
    # compact JSON its size was measured on. PyYAML's block dumper took 18 s (5.6 s with libyaml) for the
    # 5,000-object benchmark; encoding every result once with json's C encoder takes 0.15 s.
    return "".join("---\n" + dump(dict(report, results=Encoded(texts)))
                   for report, texts in _build(result, max_bytes, max_reports, now))
