"""Prometheus metrics of the webhook.

Under gunicorn every worker is a process, and a scrape reaches one of them; so
`aiadmit serve` sets PROMETHEUS_MULTIPROC_DIR before any worker starts and
`/metrics` aggregates the files of all workers (prometheus_client's multiprocess
mode). In one process (tests, `create_app` used directly) each `Metrics` owns
its own registry, so two apps in one process never share counters.

Label values are bounded: endpoint and operation are fixed sets, kind is what
the webhook configuration routes to us, outcome is one of Outcome.outcome,
policy and action come from the loaded policy set.
"""

from __future__ import annotations

import collections
import os
from typing import Optional

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   8.0, 10.0)


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, registry: Optional[CollectorRegistry] = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "aiadmit_admission_requests_total", "Admission reviews answered.",
            ["endpoint", "operation", "kind", "outcome"], registry=r)
        self.latency = Histogram(
            "aiadmit_admission_duration_seconds", "Time to answer one admission review, body read to answer.",
            ["endpoint"], buckets=LATENCY_BUCKETS, registry=r)
        self.findings = Counter(
            "aiadmit_findings_total", "Findings reported by reviews (result fail, error or skip).",
            ["policy", "action", "result"], registry=r)
        self.patches = Counter("aiadmit_mutations_total", "Reviews a policy's mutation patched.", ["policy"],
                               registry=r)
        self.bad_requests = Counter("aiadmit_bad_requests_total", "Requests answered 4xx before any policy ran.",
                                    ["endpoint", "reason"], registry=r)
        self.timeouts = Counter("aiadmit_review_timeouts_total", "Reviews that exceeded the time budget.",
                                ["endpoint"], registry=r)
        self.internal_errors = Counter("aiadmit_internal_errors_total", "Unexpected exceptions, answered safely.",
                                       ["endpoint"], registry=r)
        self.generation = Gauge("aiadmit_policy_set_generation", "Generation of the policy set serving (0 = first).",
                                registry=r, multiprocess_mode="liveall")
        self.policies = Gauge("aiadmit_policies_loaded", "Enabled policies in the serving set.", registry=r,
                              multiprocess_mode="liveall")
        self.reloads = Counter("aiadmit_policy_reloads_total", "Policy/config reload attempts.", ["outcome"],
                               registry=r)
        self.cert_reloads = Counter("aiadmit_certificate_reloads_total", "TLS certificate reload attempts.",
                                    ["outcome"], registry=r)
        self.connections_closed = Counter(
            "aiadmit_connections_closed_total",
            "Client connections closed, by why (done, handshake-timeout, header-timeout, keepalive-timeout, "
            "tls-error, client-gone, bad-request, body-unread, shutdown).", ["reason"], registry=r)
        self.cache_age = Gauge("aiadmit_context_cache_age_seconds",
                               "Seconds since a live-context cache was last confirmed current (-1: never synced).",
                               ["resource"], registry=r, multiprocess_mode="livemax")
        # labelled children by label values: `labels()` checks and stringifies its values and takes a lock on every
        # call, 8 calls per denied review; a child found here is the same object `labels()` returns. No more
        # entries than the metrics' own label sets, which are bounded (module docstring).
        self._children: dict = {}

    def _child(self, metric, *values):
        child = self._children.get((metric, values))
        if child is None:
            child = self._children[(metric, values)] = metric.labels(*values)
        return child

    def observe(self, endpoint: str, outcome, seconds: float) -> None:
        self._child(self.requests, endpoint, outcome.operation or "-", outcome.kind or "-", outcome.outcome).inc()
        self._child(self.latency, endpoint).observe(seconds)
        # counted first, one labelled increment per (policy, action, result): a 30,000-container object has
        # 360,000 findings, and a labelled increment each took 0.8 s after the answer was decided (measured)
        counts = collections.Counter((f.policy, f.action, f.result) for f in outcome.findings)
        for labels, count in counts.items():
            self._child(self.findings, *labels).inc(count)
        for policy in outcome.patched_policies:
            self._child(self.patches, policy).inc()

    def render(self) -> bytes:
        if multiprocess():
            from prometheus_client import multiprocess as mp

            registry = CollectorRegistry()
            mp.MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)


def mark_process_dead(pid: int) -> None:
    """Called by the gunicorn master when a worker exits, so its live gauges disappear."""
    if multiprocess():
        from prometheus_client import multiprocess as mp

        mp.mark_process_dead(pid)
