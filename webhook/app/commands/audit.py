"""`aiadmit audit PATH... | - | --cluster`: check manifests or a live cluster with the webhook's engine.

Thin: options -> `webhook.app.audit` / `webhook.app.clusteraudit` -> `webhook.outputs.reports`.
Exit codes: 0 clean, 1 findings at or above --fail-on, 2 unreadable input,
bad options, or a cluster that could not be read.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial

from webhook.app.audit import audit_paths
from webhook.app.parallel import default_jobs
from webhook.outputs.diagnostics import of_result
from webhook.outputs.reports import FORMATS, fragment, write
from webhook.outputs.reports.policyreport import DEFAULT_MAX_BYTES, DEFAULT_MAX_REPORTS, ETCD_LIMIT
from webhook.inputs.sources import collector_paused
from webhook.app.commands import add_engine_options
from webhook.app.commands import load_engine, missing_extra

# The formats --apply-reports can write, and the apiVersion of their objects (webhook.app.clusteraudit.REPORT_APIS).
REPORT_FORMATS = {"policyreport": "wgpolicyk8s.io/v1alpha2", "openreports": "openreports.io/v1alpha1"}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "audit", help="check manifests (files, directories, - for stdin) or a live cluster",
        description="Check Kubernetes manifests, or what runs in a cluster, against the policy bundle.")
    parser.add_argument("paths", nargs="*", metavar="PATH", help="file, directory (recursive) or - for stdin")
    parser.add_argument("--format", "-f", choices=sorted(FORMATS), default="text")
    parser.add_argument("--jobs", "-j", type=int, default=0, metavar="N",
                        help="processes evaluating in parallel (default: one per core that other work leaves idle, by the load average, and only for inputs large enough to share; 1: none)")
    parser.add_argument("--fail-on", choices=("deny", "warn", "never"), default="deny",
                        help="lowest action that makes the exit code 1 (default deny)")
    parser.add_argument("--policy", action="append", metavar="ID", help="only these policies (repeatable)")
    parser.add_argument("--skip", action="append", metavar="ID", help="not these policies (repeatable)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--verbose", "-v", action="store_true",
                        help="text format: list every check that was skipped, not only their count")
    output.add_argument("--quiet", "-q", action="store_true",
                        help="text format: print only the failing lines (failures and errors), nothing else")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the text format (auto: only on a terminal, and never with NO_COLOR set)")
    add_engine_options(parser)
    cluster = parser.add_argument_group("live cluster")
    cluster.add_argument("--cluster", action="store_true", help="audit the objects in a cluster instead of files")
    cluster.add_argument("--context", metavar="C", help="kubeconfig context (default: the current one)")
    cluster.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    scope = cluster.add_mutually_exclusive_group()
    scope.add_argument("--namespace", "-n", action="append", metavar="NS",
                       help="only this namespace (repeatable; default: the context's namespace)")
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="every namespace")
    cluster.add_argument("--include-owned", action="store_true",
                         help="also audit objects a listed controller owns (a Deployment's ReplicaSets and Pods)")
    cluster.add_argument("--page-size", type=int, default=500, metavar="N", help="list page size (default 500)")
    cluster.add_argument("--apply-reports", action="store_true",
                         help="with --format policyreport or openreports: write the reports into the cluster "
                              "(create/replace, and delete aiadmit's stale ones in the audited namespaces)")
    reports = parser.add_argument_group("policyreport and openreports formats")
    reports.add_argument("--max-report-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="N",
                         help=f"split a namespace's results into reports of at most N bytes "
                              f"(default {DEFAULT_MAX_BYTES}; etcd refuses objects over {ETCD_LIMIT})")
    reports.add_argument("--max-reports", type=int, default=DEFAULT_MAX_REPORTS, metavar="N",
                         help=f"at most N reports per namespace; beyond that results are summarised "
                              f"(default {DEFAULT_MAX_REPORTS})")
    parser.set_defaults(func=run)


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _color(choice: str) -> bool:
    if choice == "auto":
        return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    return choice == "always"


def run(args) -> int:
    if args.cluster or not args.one_shot:
        return _run(args)
    # A file audit builds what lives until its report is written, and the cyclic collector would only walk it
    # again and again (a quarter of the SARIF report's time for 5,000 objects; bench/RESULTS.md). When the process
    # ends after the report (`aiadmit` as a process: cli.entry), all of it is frozen before the collector runs
    # again: else its first collection walks every object the audit made, once more, just before exit (44 M
    # instructions of the corpus x10's 4.7 G; bench/RESULTS.md, 2026-12-07, h-report). In-process callers
    # (cli.main) go on afterwards, so nothing of theirs is frozen for good.
    with collector_paused(freeze=True):
        return _run(args)


def _run(args) -> int:
    if args.cluster and args.paths:
        return _usage("give PATHs or --cluster, not both")
    if not args.cluster and not args.paths:
        return _usage("nothing to audit: give PATHs (- for stdin) or --cluster")
    if args.apply_reports and not (args.cluster and args.format in REPORT_FORMATS):
        return _usage("--apply-reports needs --cluster and --format policyreport or openreports")
    if not 10_000 <= args.max_report_bytes <= ETCD_LIMIT:
        return _usage(f"--max-report-bytes must be between 10000 and {ETCD_LIMIT}")
    if args.max_reports < 1 or args.page_size < 1:
        return _usage("--max-reports and --page-size must be at least 1")
    engine = load_engine(args)
    if engine is None:
        return 2
    api = None
    from webhook.app import objectaudit  # the Policy/PolicyException objects the webhook would enforce too

    if args.cluster:
        missing = missing_extra("audit --cluster", "cluster", ("kubernetes",))
        if missing is not None:
            return missing
        from webhook.app.clusteraudit import ClusterError, Progress, audit_cluster, connect
        try:
            api, context, default_namespace = connect(args.context, args.kubeconfig)
            engine, object_problems = objectaudit.extend(engine, *objectaudit.from_cluster(api))
        except ClusterError as exc:
            return _usage(f"cluster: {exc}")
    else:
        found, exceptions = objectaudit.from_files(args.paths)
        engine, object_problems = objectaudit.extend(engine, files=found, file_exceptions=exceptions)
    unknown = sorted((set(args.policy or []) | set(args.skip or [])) - set(engine.by_id))
    if unknown:
        return _usage(f"unknown policy id(s): {', '.join(unknown)} (see `aiadmit policies`)")
    selection = {"policies": set(args.policy or []) or None, "skip": set(args.skip or []) or None,
                 "jobs": args.jobs if args.jobs > 0 else default_jobs()}
    options = {"color": _color(args.color), "verbose": args.verbose, "quiet": args.quiet,
               "fail_on": args.fail_on, "now": time.time(),
               "max_bytes": args.max_report_bytes, "max_reports": args.max_reports}
    if args.cluster:
        try:
            namespaces = None if args.all_namespaces else (args.namespace or [default_namespace])
            result = audit_cluster(engine, api, context, namespaces, include_owned=args.include_owned,
                                   page_size=args.page_size, progress=Progress(), **selection)
        except ClusterError as exc:
            return _usage(f"cluster: {exc}")
    else:
        # Each object's part of the report is rendered by the worker that evaluated it, in parallel.
        prepare = partial(fragment, args.format, engine=engine, **options)
        result = audit_paths(engine, args.paths, one_shot=args.one_shot, prepare=prepare, **selection)
    for problem in object_problems:  # a Policy or PolicyException that does not load: left out, exit 2
        print(f"{problem} (not loaded)", file=sys.stderr)
    for line in of_result(result, quiet=args.quiet):  # one form and one stream for what is not a finding
        print(line, file=sys.stderr)
    sys.stderr.flush()
    write(args.format, sys.stdout, result, engine, fragments=result.prepared, **options)
    if args.apply_reports:
        from importlib import import_module

        from webhook.app.clusteraudit import apply_reports
        writer = import_module(f"webhook.outputs.reports.{FORMATS[args.format]}")
        reports = writer.build_reports(result, engine, max_bytes=args.max_report_bytes, max_reports=args.max_reports,
                                       now=options["now"])  # the very objects printed above
        problems = apply_reports(api, reports, namespaces, log=lambda line: print(line, file=sys.stderr),
                                 api_version=REPORT_FORMATS[args.format])
        for problem in problems:
            print(f"error: applying reports: {problem}", file=sys.stderr)
        if problems:
            return 2
    return 2 if object_problems else result.exit_code(args.fail_on)
