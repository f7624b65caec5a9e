"""`aiadmit reports-controller`: keep one PolicyReport / OpenReports Report per namespace current.

Thin: options -> engine, API client, optional Lease election, metrics server -> webhook.app.reportscontroller.
The cluster's Policy and PolicyException objects are watched (as `serve` does) unless --no-cluster-objects.
Runs until SIGTERM (exit 0) or a lost Lease (exit 1, so its Deployment restarts it as a candidate).
Exit 2: bad options, policies that do not load, or no cluster to read.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading

from webhook.app.commands import add_engine_options, load_engine, missing_extra, policy_paths

REPORT_APIS = {"policyreport": "wgpolicyk8s.io/v1alpha2", "openreports": "openreports.io/v1alpha1"}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "reports-controller", help="keep a PolicyReport (or OpenReports Report) per namespace current",
        description="List and watch every pod-bearing kind and keep aiadmit's per-namespace reports current.")
    add_engine_options(parser)
    parser.add_argument("--format", "-f", choices=sorted(REPORT_APIS), default="policyreport",
                        help="report API to write (default policyreport: wgpolicyk8s.io/v1alpha2)")
    parser.add_argument("--context", metavar="C", help="kubeconfig context (default: the current one, else in-cluster)")
    parser.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, in-cluster)")
    parser.add_argument("--metrics-port", type=int, default=9090, metavar="PORT",
                        help="Prometheus metrics on this port (0: none; default 9090)")
    parser.add_argument("--metrics-address", default="0.0.0.0", metavar="ADDR")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help="write a namespace's report at most once per this many seconds (default 1)")
    parser.add_argument("--page-size", type=int, default=500, metavar="N", help="list page size (default 500)")
    parser.add_argument("--leader-elect", action="store_true",
                        help="hold a coordination.k8s.io Lease before writing (run more than one replica)")
    parser.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE", "aiadmit"), metavar="NS")
    parser.add_argument("--lease-name", default="aiadmit-reports-controller", metavar="NAME")
    parser.add_argument("--no-cluster-objects", action="store_true",
                        help="do not watch the cluster's Policy and PolicyException objects (aiadmit.dev/v1alpha1; "
                             "watched by default, as `serve` does; none while their CRDs are not installed)")
    parser.set_defaults(func=run)


def run(args) -> int:
    missing = missing_extra("reports-controller", "cluster", ("kubernetes", "prometheus_client"))
    if missing is not None:
        return missing
    if args.page_size < 1 or args.interval < 0:
        print("error: --page-size must be at least 1 and --interval not negative", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    engine = load_engine(args)
    if engine is None:
        return 2
    from prometheus_client import start_http_server

    from webhook.app.clusteraudit import ClusterError, connect
    from webhook.app.leader import LeaderElector
    from webhook.app.reportmetrics import ReportMetrics
    from webhook.app.reportscontroller import Controller
    from webhook.app.reportwriter import ReportWriter

    try:
        api, context, _ = connect(args.context, args.kubeconfig)
    except ClusterError as exc:
        print(f"error: cluster: {exc}", file=sys.stderr)
        return 2
    metrics = ReportMetrics()
    if args.metrics_port:
        start_http_server(args.metrics_port, addr=args.metrics_address, registry=metrics.registry)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    elector = None
    if args.leader_elect:
        identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}-{os.getpid()}"
        elector = LeaderElector(api, args.lease_namespace, args.lease_name, identity)
        acquiring = threading.Thread(target=elector.acquire, daemon=True)
        acquiring.start()
        while acquiring.is_alive() and not done.wait(0.5):
            pass
        if done.is_set():
            elector.stop.set()
            return 0
    reload_paths = tuple(policy_paths(args) or ()) + ((args.config,) if args.config else ())
    objects, loader = None, lambda: _engine_or_raise(args)
    if not args.no_cluster_objects:
        from webhook.app.clusterobjects import ClusterObjects

        # fed by the controller's own watchers; no api client: the webhook writes the objects' status, not this
        objects = ClusterObjects()
        loader = lambda: objects.engine(policy_paths(args), args.config, None)  # noqa: E731 - as the webhook loads
    controller = Controller(api, engine, loader, metrics, context, ReportWriter(api, REPORT_APIS[args.format]),
                            args.interval, args.page_size, reload_paths, objects)
    try:
        controller.start()
    except (ClusterError, OSError) as exc:
        print(f"error: cluster: {exc}", file=sys.stderr)
        return 2
    while not done.wait(0.5):
        if elector is not None and elector.lost.is_set():
            controller.stop.set()
            return 1
    controller.stop.set()
    if elector is not None:
        elector.stop.set()
    return 0


def _engine_or_raise(args):
    engine = load_engine(args)
    if engine is None:
        raise ValueError("the policies do not load (problems above)")
    return engine
