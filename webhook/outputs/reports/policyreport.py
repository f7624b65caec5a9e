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


from webhook.outputs.reports import fragments_of
from webhook.outputs.reports.jsonreport import Encoded, dump

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


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def results_for(evaluation, stamp: dict) -> list[tuple[str, str]]:
    """(status, the result as compact JSON) for each finding, then a `pass` for each policy that found nothing."""
    resource = evaluation.resource
    shared = {"scored": True, "timestamp": stamp, "resources": [_resource_ref(resource)]}
    out = []
    with_findings = set()
    for finding in evaluation.findings:
        with_findings.add(finding.policy)
        if finding.result == "fail":
            status = "warn" if finding.action == "warn" else "fail"
        else:
            status = finding.result  # skip | error
        line, column = finding.position() if resource.origin.located else (0, 0)
        properties = {"action": finding.action, "path": finding.pointer,
                      "file": resource.origin.file if resource.origin.cluster is None else None,
                      "line": line or None, "column": column or None}
        entry: dict = {"source": "aiadmit", "policy": finding.policy}
        if finding.rule:
            entry["rule"] = finding.rule
        entry["result"] = status
        entry.update(shared)
        if finding.message:
            entry["message"] = finding.message
        if finding.action:
            entry["severity"] = SEVERITY[finding.action]
        entry["properties"] = {key: str(value) for key, value in properties.items() if value not in (None, "")}
        out.append((status, _COMPACT(entry)))
    for policy_id in evaluation.policies:
        if policy_id not in with_findings:
            out.append(("pass", _COMPACT({"source": "aiadmit", "policy": policy_id, "result": "pass", **shared})))
    return out


def _stamp(now: Optional[float]) -> dict:
    return {"seconds": int(time.time() if now is None else now), "nanos": 0}


def fragment(evaluation, engine, now: Optional[float] = None, **options) -> tuple:
    """(the namespace whose report holds the evaluation's results, [(result status, the result as compact JSON)])."""
    if not (evaluation.policies or evaluation.findings):
        return None, []
    return report_namespace(evaluation.resource), results_for(evaluation, _stamp(now))


def _summary(statuses: list[str]) -> dict:
    counts = {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    for status in statuses:
        counts[status] += 1
    return counts


def _pack(texts: list[str], max_bytes: int) -> list[range]:
    """Consecutive runs of results (by index) whose JSON stays within `max_bytes` each.

    A run of n texts is `[` + the texts joined by n - 1 commas + `]`: the sum of (each text + 1) plus 1, which is
    why `size` starts at 1 (it started at 0 and let a run end one byte over the limit).
    """
    chunks: list[range] = []
    start, size = 0, 1
    for index, text in enumerate(texts):
        entry_size = (len(text) if text.isascii() else len(text.encode("utf-8"))) + 1
        if index > start and size + entry_size > max_bytes:
            chunks.append(range(start, index))
            start, size = index, 1
        size += entry_size
    chunks.append(range(start, len(texts)))
    return chunks


def build_reports(result, engine=None, max_bytes: int = DEFAULT_MAX_BYTES, max_reports: int = DEFAULT_MAX_REPORTS,
                  now: Optional[float] = None) -> list[dict]:
    """PolicyReport and ClusterPolicyReport objects for an audit result, each within `max_bytes` of results."""
    return [dict(report, results=[json.loads(text) for text in texts])
            for report, texts in packed(result, engine, None, max_bytes, max_reports, now)]


def packed(result, engine, fragments: Optional[list], max_bytes: int, max_reports: int,
           now: Optional[float]) -> list[tuple[dict, list[str]]]:
    """The reports without their results, each with its results as compact JSON (measured once, written as is).

    Also the body of the OpenReports writer (openreports.py), which changes only the envelope."""
    now = time.time() if now is None else now  # one timestamp for every result
    by_namespace: dict[Optional[str], list[tuple[str, str]]] = defaultdict(list)
    for namespace, results in fragments_of(fragment, result, engine, fragments, {"now": now}):
        if results:
            by_namespace[namespace] += results
    reports = []
    for namespace in sorted(by_namespace, key=lambda n: (n is not None, n or "")):
        reports += pack_namespace(namespace, by_namespace[namespace], max_bytes, max_reports)
    return reports


def pack_namespace(namespace: Optional[str], results: list[tuple[str, str]], max_bytes: int = DEFAULT_MAX_BYTES,
                   max_reports: int = DEFAULT_MAX_REPORTS) -> list[tuple[dict, list[str]]]:
    """One namespace's reports (None: the cluster report) from its (status, result JSON) pairs, split and summarised
    as `packed` does; also what the reports controller (webhook.app.reportscontroller) writes per namespace."""
    reports = []
    chunks = _pack([text for _, text in results], max_bytes)
    omitted: list[tuple[str, str]] = []
    if len(chunks) > max_reports:
        ordered = sorted(results, key=lambda entry: _RANK[entry[0]])
        keep = _pack([text for _, text in ordered], max_bytes)[max_reports - 1].stop
        results, omitted = ordered[:keep], ordered[keep:]
        chunks = _pack([text for _, text in results], max_bytes)
    base = f"aiadmit-{namespace}" if namespace else "aiadmit-cluster"
    for position, span in enumerate(chunks):
        chunk = results[span.start:span.stop]
        metadata: dict = {"name": base if position == 0 else f"{base}-{position + 1}"}
        if namespace:
            metadata["namespace"] = namespace
        metadata["labels"] = dict(MANAGED_BY)
        counts = _summary([status for status, _ in chunk])
        if omitted and position == 0:
            metadata["annotations"] = {OMITTED_ANNOTATION: str(len(omitted))}
            for key, value in _summary([status for status, _ in omitted]).items():  # the counts stay whole
                counts[key] += value
        reports.append(({
            "apiVersion": API_VERSION,
            "kind": "PolicyReport" if namespace else "ClusterPolicyReport",
            "metadata": metadata,
            "summary": counts,  # summed over a namespace's reports: every result counted once
        }, [text for _, text in chunk]))
    return reports


def render(result, engine, fragments=None, max_bytes: int = DEFAULT_MAX_BYTES,
           max_reports: int = DEFAULT_MAX_REPORTS, now: Optional[float] = None, **options) -> str:
    # A YAML stream of JSON documents (JSON is YAML; `kubectl apply -f` takes it), one result per line, each the
    # compact JSON its size was measured on. PyYAML's block dumper took 18 s (5.6 s with libyaml) for the
    # 5,000-object benchmark; encoding every result once with json's C encoder takes 0.15 s.
    return "".join("---\n" + dump(dict(report, results=Encoded(texts)))
                   for report, texts in packed(result, engine, fragments, max_bytes, max_reports, now))
