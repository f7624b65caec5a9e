"""`--format openreports`: `openreports.io/v1alpha1` Report / ClusterReport objects.

OpenReports is the successor of the wgpolicyk8s.io PolicyReport API, kept by
the same community (Kyverno writes it from 1.15 behind a flag; Policy Reporter
reads both). Its results have the same shape, so everything about them is the
PolicyReport writer's (policyreport.py): one report per namespace (a
ClusterReport for cluster-scoped objects), a result per resource and policy,
packing under etcd's request limit, the summary of a flood. Only the envelope
differs: the group and version, the kinds, and `source: aiadmit` on the report
itself (the API allows it at both levels; each result keeps its own too).
tests/test_openreports.py validates the output against the OpenReports CRDs.
"""

from __future__ import annotations

from typing import Optional

from webhook.outputs.reports import policyreport
from webhook.outputs.reports.jsonreport import Encoded, dump

API_VERSION = "openreports.io/v1alpha1"
KINDS = {"PolicyReport": "Report", "ClusterPolicyReport": "ClusterReport"}


def _envelope(report: dict) -> dict:
    return dict(report, apiVersion=API_VERSION, kind=KINDS[report["kind"]], source="aiadmit")


def fragment(evaluation, engine, now: Optional[float] = None, **options) -> tuple:
    return policyreport.fragment(evaluation, engine, now=now)


def build_reports(result, engine=None, max_bytes: int = policyreport.DEFAULT_MAX_BYTES,
                  max_reports: int = policyreport.DEFAULT_MAX_REPORTS, now: Optional[float] = None) -> list[dict]:
    """Report and ClusterReport objects for an audit result, each within `max_bytes` of results."""
    return [_envelope(report) for report in policyreport.build_reports(result, engine, max_bytes, max_reports, now)]


def render(result, engine, fragments=None, max_bytes: int = policyreport.DEFAULT_MAX_BYTES,
           max_reports: int = policyreport.DEFAULT_MAX_REPORTS, now: Optional[float] = None, **options) -> str:
    # The same stream of JSON documents as the PolicyReport writer's (see there why JSON).
    return "".join("---\n" + dump(dict(_envelope(report), results=Encoded(texts)))
                   for report, texts in policyreport.packed(result, engine, fragments, max_bytes, max_reports, now))
