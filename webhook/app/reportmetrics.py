"""Prometheus metrics of the reports controller (its own registry, served on its own port).

Labels are bounded: `kind` is a kind of the kinds table, a fact kind, Policy or PolicyException, `verb` is list or
watch, `scope` is namespace or cluster, `outcome` is loaded, invalid or deleted.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LAG_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class ReportMetrics:
    def __init__(self, registry=None):
        self.registry = r = registry or CollectorRegistry()
        self.written = Counter("aiadmit_reports_written_total",
                               "Namespaces whose reports were written (created, replaced or deleted).", registry=r)
        self.write_errors = Counter("aiadmit_reports_write_errors_total",
                                    "Namespace writes that failed and were queued again.", registry=r)
        self.pending = Gauge("aiadmit_reports_objects_pending",
                             "Watch events received and not yet evaluated.", registry=r)
        self.lag = Histogram("aiadmit_reports_lag_seconds",
                             "From the oldest change a namespace's write includes to the write's end.",
                             buckets=LAG_BUCKETS, registry=r)
        self.last_lag = Gauge("aiadmit_reports_last_lag_seconds", "The lag of the last namespace written.",
                              registry=r)
        self.evaluated = Counter("aiadmit_reports_objects_evaluated_total", "Objects evaluated.", registry=r)
        self.requests = Counter("aiadmit_reports_api_requests_total", "List pages and watches requested.",
                                ["kind", "verb"], registry=r)
        self.watch_failures = Counter(
            "aiadmit_reports_watch_failures_total",
            "Lists and watches that failed and are retried (a 403 is a permission the role lacks: the kind is "
            "never read and aiadmit_reports_synced stays 0).", ["kind"], registry=r)
        self.resyncs = Counter("aiadmit_reports_resyncs_total",
                               "Re-reads a fact or policy change caused (namespace: one namespace's objects).",
                               ["scope"], registry=r)
        self.object_changes = Counter(
            "aiadmit_reports_cluster_object_changes_total",
            "Policy and PolicyException objects added, changed (a new generation) or deleted, by what became of them "
            "(loaded, invalid: left out, its previous generation kept if one loaded; deleted).",
            ["kind", "outcome"], registry=r)
        self.namespaces = Gauge("aiadmit_reports_namespaces", "Namespaces (and the cluster) with a report.",
                                registry=r)
        self.synced = Gauge("aiadmit_reports_synced",
                            "1 once every object listed at start is in a written report.", registry=r)
