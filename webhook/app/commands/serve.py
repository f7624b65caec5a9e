"""`aiadmit serve`: the admission webhook over TLS (gunicorn, gevent workers; see webhook/app/serving.py).

`--dev` is the README's first command: it makes (once, and again only when
missing, expiring or not for localhost) a CA and serving pair in certs/dev/,
serves the built-in policies on https://127.0.0.1:8443, and prints a curl
command that sends a sample review.
"""

from __future__ import annotations

import argparse
import os
import sys

from webhook.app.commands import add_engine_options, missing_extra, policy_paths
from webhook.inputs import bounds

DEV_DIR = os.path.join("certs", "dev")
DEV_HOSTS = ["localhost", "127.0.0.1"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="run the admission webhook (HTTPS)",
                                   description="Serve POST /validate and /mutate (AdmissionReview v1) over TLS, "
                                               "plus /healthz, /readyz and /metrics.")
    parser.add_argument("--dev", action="store_true",
                        help=f"local development: dev certificates in {DEV_DIR}/, 127.0.0.1:8443, built-in policies")
    parser.add_argument("--cert-file", metavar="FILE", help="PEM serving certificate (re-read when it changes)")
    parser.add_argument("--key-file", metavar="FILE", help="PEM private key of the certificate")
    parser.add_argument("--host", default=None, help="address to bind (default 0.0.0.0; 127.0.0.1 with --dev)")
    parser.add_argument("--port", type=int, default=8443, help="port (default 8443)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2: one per core)")
    parser.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)  # gthread's; now ignored
    limits = parser.add_argument_group("connection limits", "every phase of a client connection is bounded "
                                                            "(docs/webhook.md, \"Connections\")")
    limits.add_argument("--handshake-timeout", type=float, default=5.0, metavar="SECONDS",
                        help="time from accept to a finished TLS handshake (default 5)")
    limits.add_argument("--header-timeout", type=float, default=5.0, metavar="SECONDS",
                        help="time to send a request's headers, from its first byte or from the handshake "
                             "(default 5)")
    limits.add_argument("--body-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="time to send a request's body, in all (default 10)")
    limits.add_argument("--keepalive-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="how long a connection may stay idle between requests (default 30)")
    limits.add_argument("--keepalive-requests", type=int, default=1000, metavar="N",
                        help="requests on one connection before the answer says Connection: close (default 1000)")
    limits.add_argument("--max-connections", type=int, default=1000, metavar="N",
                        help="open connections per worker; more wait in the listen backlog (default 1000)")
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE"),
                        help="the webhook's own namespace, never checked (default $POD_NAMESPACE)")
    parser.add_argument("--reload-interval", type=float, default=5.0, metavar="SECONDS",
                        help="how often certificate, key, policy and config files are checked for changes (5)")
    parser.add_argument("--budget", type=float, default=8.0, metavar="SECONDS",
                        help="time budget of one review; keep it below the webhook's timeoutSeconds (default 8)")
    parser.add_argument("--on-timeout", choices=("deny", "allow"), default="deny",
                        help="what /validate answers when the budget is spent (default deny, like failurePolicy Fail)")
    parser.add_argument("--max-body", type=int, default=6 * 1024 * 1024, metavar="BYTES",
                        help="largest request body accepted (default 6 MiB)")
    parser.add_argument("--client-ca-file", metavar="FILE",
                        help="CA certificates (PEM) of the clients allowed to send reviews: the API server's "
                             "admission kubeconfig client certificate; without one, every path but /healthz, /readyz "
                             "and /metrics answers 403 (docs/operations.md, \"Authenticating the API server\")")
    parser.add_argument("--max-review-nodes", type=int, default=bounds.MAX_NODES, metavar="N",
                        help="JSON values and keys per review, counted before decoding; more: refused (default "
                             "200,000; docs/webhook.md, \"Review bounds\")")
    parser.add_argument("--max-containers", type=int, default=bounds.MAX_CONTAINERS, metavar="N",
                        help="containers per object (every pod template, init and ephemeral included); more: "
                             "refused before the policies run (default 500)")
    parser.add_argument("--graceful-timeout", type=float, default=25.0, metavar="SECONDS",
                        help="how long in-flight reviews may run after SIGTERM (default 25)")
    context = parser.add_mutually_exclusive_group()
    context.add_argument("--kubeconfig", metavar="FILE", help="live cluster context from this kubeconfig")
    context.add_argument("--in-cluster", action="store_true",
                         help="live cluster context from the pod's service account (default when "
                              "KUBERNETES_SERVICE_HOST is set)")
    context.add_argument("--context", action="append", default=[], metavar="FILE",
                         help="offline cluster context: Namespaces, ResourceQuotas, ... from these manifests")
    context.add_argument("--no-cluster", action="store_true", help="no cluster context (context rules: skip)")
    context.add_argument("--no-cluster-objects", action="store_true",
                         help="with a cluster context: do not watch the cluster's Policy and PolicyException objects "
                              "(aiadmit.dev/v1alpha1; watched by default, none while their CRDs are not installed)")
    parser.add_argument("--facts-max-age", type=float, default=120.0, metavar="SECONDS",
                        help="a live context cache not confirmed for this long counts as unknown (default 120)")
    parser.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    add_engine_options(parser)
    parser.set_defaults(func=run)


def _dev_certs() -> tuple[str, str] | None:
    from webhook.app import certs

    problem = certs.usable(DEV_DIR, DEV_HOSTS)
    if problem:
        reason = problem if os.path.exists(os.path.join(DEV_DIR, "ca.crt")) else "none yet"
        print(f"aiadmit: generating dev certificates in {DEV_DIR}/ ({reason})", file=sys.stderr)
        certs.generate(DEV_DIR, DEV_HOSTS)
    else:
        print(f"aiadmit: reusing dev certificates in {DEV_DIR}/", file=sys.stderr)
    return os.path.join(DEV_DIR, "tls.crt"), os.path.join(DEV_DIR, "tls.key")


SERVER_MODULES = ("flask", "gunicorn", "gevent", "prometheus_client", "cryptography", "kubernetes")


def _limits_problem(options) -> str | None:
    for name in ("handshake_timeout", "header_timeout", "body_timeout", "keepalive_timeout"):
        if not getattr(options, name) > 0:
            return f"--{name.replace('_', '-')} must be a positive number of seconds"
    for name in ("keepalive_requests", "max_connections", "workers", "max_review_nodes", "max_containers"):
        if getattr(options, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1"
    return None


def run(args) -> int:
    missing = missing_extra("serve", "webhook", SERVER_MODULES)
    if missing is not None:
        return missing
    from webhook.app import certs  # cryptography: imported by the command that needs it, not by every aiadmit start
    from webhook.language.config import ConfigError
    from webhook.language.policy import PolicyLoadError
    from webhook.app.serving import ServeOptions, run as serve

    host = args.host
    cert_file, key_file = args.cert_file, args.key_file
    if args.dev:
        try:
            cert_file, key_file = _dev_certs()
        except (certs.CertError, OSError) as exc:
            print(f"error: cannot prepare dev certificates: {exc}", file=sys.stderr)
            return 2
        host = host or "127.0.0.1"
    if not cert_file or not key_file:
        print("error: --cert-file and --key-file are required (or --dev for local development)", file=sys.stderr)
        return 2
    in_cluster = args.in_cluster or (bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not (
        args.no_cluster or args.kubeconfig or args.context or args.dev))
    options = ServeOptions(
        cert_file=cert_file, key_file=key_file, host=host or "0.0.0.0", port=args.port, config=args.config,
        policies=policy_paths(args) or [], own_namespace=args.namespace, workers=args.workers,
        reload_interval=args.reload_interval, budget_seconds=args.budget, max_body_bytes=args.max_body,
        on_timeout=args.on_timeout, graceful_timeout=args.graceful_timeout, context_files=args.context,
        kubeconfig=args.kubeconfig, in_cluster=in_cluster, facts_max_age=args.facts_max_age,
        cluster_objects=not args.no_cluster_objects,
        log_level=args.log_level, handshake_timeout=args.handshake_timeout, header_timeout=args.header_timeout,
        body_timeout=args.body_timeout, keepalive_timeout=args.keepalive_timeout,
        keepalive_requests=args.keepalive_requests, max_connections=args.max_connections,
        max_review_nodes=args.max_review_nodes, max_containers=args.max_containers,
        client_ca_file=args.client_ca_file)
    problem = _limits_problem(options)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.threads is not None:
        print("aiadmit: --threads is ignored: connections are greenlets of one event loop per worker",
              file=sys.stderr)
    if args.dev:
        ca = os.path.join(DEV_DIR, "ca.crt")
        print(f"aiadmit: serving https://{options.host}:{options.port} — try:\n"
              f"  curl --cacert {ca} -H 'Content-Type: application/json' "
              f"--data @examples/pytorchjob-gpu.json https://{options.host}:{options.port}/validate",
              file=sys.stderr, flush=True)
    try:
        return serve(options)
    except certs.CertError as exc:
        print(f"error: {exc}", file=sys.stderr)
    except (PolicyLoadError, ConfigError) as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
    return 2
