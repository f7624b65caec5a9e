"""Production serving: gunicorn with an event-loop worker (webhook/app/gworker.py) over TLS, with reloads.

Why this stack: the engine is CPU-bound Python, so parallelism comes from
processes (one per core). Inside a process, connections are greenlets on one
gevent loop: a client that is slow or idle during the handshake, the headers
or the body holds a greenlet until its own time-out, never the worker. The
gthread worker used before held one of its few threads per such client, and
eight of them stopped the webhook; docs/reliability.md has the comparison and
the figures (bench/RESULTS.md, "Serving stack").

TLS: the worker wraps every accepted connection with the context of
`TLSFiles`, built once per worker and replaced when `--cert-file`/`--key-file`
change on disk (checked at most every `--reload-interval` seconds, on the
accepting path). New connections get the new certificate; open connections
finish on the old one; a half-written pair that fails to load is logged,
counted and ignored until the files change again. Only TLS 1.2 (AEAD suites)
and TLS 1.3 are offered.

Policies and config: each worker reloads them when the files change, and (with a cluster) when the cluster's
Policy and PolicyException objects do: app/reloader.py, app/clusterobjects.py.

Shutdown: SIGTERM makes gunicorn stop accepting and lets each worker finish
its in-flight reviews (up to `graceful_timeout`); idle kept-alive
connections are closed at once.
"""

from __future__ import annotations

import logging
import os
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from webhook.app.certs import CertError, read_pair
from webhook.app.reloader import PolicyReloader, _signature

log = logging.getLogger("aiadmit.serving")


# TLS 1.2 suites offered: ECDHE key exchange with an AEAD cipher only (no CBC: Lucky13-style padding oracles;
# no static RSA: no forward secrecy). Go's TLS client (the API server's) offers all of them. TLS 1.3 suites are
# all AEAD and are not affected by this list.
TLS12_CIPHERS = ":".join([
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
])


def server_context(cert_file: str, key_file: str, client_ca_file: Optional[str] = None) -> ssl.SSLContext:
    """A server SSLContext for the pair: TLS 1.2 (AEAD suites only) and 1.3, no compression, no renegotiation.

    With `client_ca_file`, a client certificate is asked for and, when one is sent, verified against those CAs
    (a certificate that does not verify ends the handshake). It stays optional at the TLS level: the kubelet's
    probes and Prometheus present none. The worker then refuses every path but the probes' and /metrics to a
    connection without one, before reading the body (gworker.py).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_NO_RENEGOTIATION
    context.set_ciphers(TLS12_CIPHERS)
    context.load_cert_chain(certfile=cert_file, keyfile=key_file)
    if client_ca_file:
        context.load_verify_locations(cafile=client_ca_file)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


class TLSFiles:
    """The current SSLContext of a certificate/key pair, rebuilt when the files change."""

    def __init__(self, cert_file: str, key_file: str, interval: float = 5.0,
                 on_reload: Optional[Callable[[str], None]] = None, client_ca_file: Optional[str] = None):
        self.cert_file, self.key_file, self.interval = cert_file, key_file, interval
        self.client_ca_file = client_ca_file
        self.on_reload = on_reload or (lambda outcome: None)
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._signature = _signature(self._files())
        self._context = self._build()  # raises CertError: a server must not start without a usable pair
        self.pid = os.getpid()

    def _files(self) -> list[str]:
        return [self.cert_file, self.key_file] + ([self.client_ca_file] if self.client_ca_file else [])

    def _build(self) -> ssl.SSLContext:
        read_pair(self.cert_file, self.key_file)  # clear errors (file, mismatch) before OpenSSL's terse ones
        try:
            return server_context(self.cert_file, self.key_file, self.client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            files = "/".join(self._files())
            raise CertError(f"{files}: {exc}") from None

    def context(self) -> ssl.SSLContext:
        if time.monotonic() - self._checked >= self.interval:
            self.check()
        return self._context

    def check(self) -> bool:
        """Reload if the files changed; True when a new context was installed."""
        with self._lock:
            self._checked = time.monotonic()
            signature = _signature(self._files())
            if signature == self._signature:
                return False
            self._signature = signature
            try:
                context = self._build()
            except CertError as exc:
                log.error("certificate reload rejected; still serving the previous certificate",
                          extra={"fields": {"error": str(exc)[:300]}})
                self.on_reload("failure")
                return False
            self._context = context
            log.info("certificate reloaded", extra={"fields": {"cert_file": self.cert_file}})
            self.on_reload("success")
            return True


@dataclass
class ServeOptions:
    cert_file: str
    key_file: str
    host: str = "0.0.0.0"
    port: int = 8443
    config: Optional[str] = None
    policies: list[str] = field(default_factory=list)
    own_namespace: Optional[str] = None
    workers: int = 2
    reload_interval: float = 5.0
    budget_seconds: float = 8.0
    max_body_bytes: int = 6 * 1024 * 1024
    client_ca_file: Optional[str] = None  # reviews only from clients with a certificate these CAs signed
    max_review_nodes: int = 200_000  # the review bounds (inputs/bounds.py)
    max_containers: int = 500
    on_timeout: str = "deny"
    graceful_timeout: float = 25.0
    context_files: list[str] = field(default_factory=list)
    kubeconfig: Optional[str] = None
    in_cluster: bool = False
    facts_max_age: float = 120.0
    cluster_objects: bool = True  # watch Policy/PolicyException objects (with live facts: app/clusterobjects.py)
    log_level: str = "info"
    # Connection limits (gworker.py): every phase of a connection ends by its own deadline.
    handshake_timeout: float = 5.0
    header_timeout: float = 5.0
    body_timeout: float = 10.0
    keepalive_timeout: float = 30.0
    keepalive_requests: int = 1000
    max_connections: int = 1000


def build_facts(options: ServeOptions):
    """Offline facts from --context files, live facts from a kubeconfig or the pod's service account, or none."""
    from webhook.model.facts import NoFacts, OfflineFacts

    if options.context_files:
        from webhook.inputs.sources import load_paths

        loaded = load_paths(options.context_files)
        return OfflineFacts(loaded.resources)
    api = api_client(options)
    if api is not None:
        from webhook.inputs.livefacts import LiveFacts

        return LiveFacts(api, max_age=options.facts_max_age).start()
    return NoFacts()


def api_client(options: ServeOptions):
    """A client of the cluster from the kubeconfig or the pod's service account; None without either."""
    if not (options.kubeconfig or options.in_cluster):
        return None
    from kubernetes import client, config

    if options.kubeconfig:
        return config.new_client_from_config(config_file=options.kubeconfig)
    config.load_incluster_config()
    return client.ApiClient()


def build_app(options: ServeOptions):
    """The Flask app of one worker: engine, facts, metrics, reloader."""
    from webhook.engine.core import Engine
    from webhook.app.metrics import Metrics
    from webhook.app.server import EngineSource, Settings, create_app, setup_logging

    setup_logging(getattr(logging, options.log_level.upper(), logging.INFO))
    metrics = Metrics()
    objects = None
    if options.cluster_objects and not options.context_files and (options.kubeconfig or options.in_cluster):
        from webhook.app.clusterobjects import ClusterObjects

        objects = ClusterObjects(api_client(options)).start()
        objects.wait_synced(20.0)  # the cluster's policies from the first engine on, unless the API is away
        engine = objects.engine(options.policies or None, options.config, options.own_namespace).prepare()
    else:
        engine = Engine.load(options.policies or None, options.config, options.own_namespace).prepare()
    source = EngineSource(engine, build_facts(options))
    settings = Settings(budget_seconds=options.budget_seconds, max_body_bytes=options.max_body_bytes,
                        on_timeout=options.on_timeout, max_nodes=options.max_review_nodes,
                        max_containers=options.max_containers)
    app = create_app(source, metrics, settings)
    PolicyReloader(options, source, metrics, objects).start()
    if objects is not None:
        objects.write_statuses()
    _WORKER["metrics"] = metrics
    return app


_WORKER: dict = {}  # per process: the options (set before forking), the TLSFiles and Metrics of this worker


def worker_options() -> ServeOptions:
    """The options of this server, as the worker processes see them (set by run() before gunicorn forks)."""
    return _WORKER["options"]


def current_max_body() -> int:
    return worker_options().max_body_bytes


def worker_tls() -> TLSFiles:
    """This worker's TLSFiles, made on its first connection (after the fork, after gevent patched ssl)."""
    tls = _WORKER.get("tls")
    if tls is None or tls.pid != os.getpid():
        options = worker_options()

        def counted(outcome: str) -> None:
            if _WORKER.get("metrics") is not None:
                _WORKER["metrics"].cert_reloads.labels(outcome).inc()

        tls = _WORKER["tls"] = TLSFiles(options.cert_file, options.key_file, options.reload_interval, counted,
                                        options.client_ca_file)
    return tls


def count_closed(reason: str) -> None:
    """Count a closed connection by why it closed (time-outs, TLS errors, ...); never raises."""
    metrics = _WORKER.get("metrics")
    if metrics is not None:
        try:
            metrics.connections_closed.labels(reason).inc()
        except Exception:
            pass


class _JsonGunicornLogger:
    """gunicorn's own messages (boot, worker exits, signals) as JSON lines like ours."""

    @staticmethod
    def make():
        from gunicorn.glogging import Logger

        from webhook.app.server import JsonFormatter

        class JsonLogger(Logger):
            def setup(self, cfg):
                super().setup(cfg)
                for handler in self.error_log.handlers:
                    handler.setFormatter(JsonFormatter())

        return JsonLogger


def run(options: ServeOptions) -> int:
    """Serve until SIGTERM/SIGINT. Validates the TLS pair and the policy set first (exit 2 on failure)."""
    import shutil
    import tempfile

    # prometheus_client picks its value store when first imported: the directory must be set before that,
    # so that every worker (forked later) writes its metrics where /metrics of any worker reads them.
    metrics_dir, owner = None, os.getpid()  # ours to remove when the server stops
    if options.workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="aiadmit-metrics-")
        if "prometheus_client.values" in sys.modules:  # imported early by some module: choose the store again
            from prometheus_client import values

            values.ValueClass = values.get_value_class()

    try:
        return _run(options)
    finally:
        # Every start made one and none was removed (207 in this machine's /tmp after a day of test servers).
        # Workers are forked inside _run and leave it by SystemExit through here too: only the arbiter removes it.
        if metrics_dir is not None and os.getpid() == owner:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _run(options: ServeOptions) -> int:
    from gunicorn.app.base import BaseApplication

    TLSFiles(options.cert_file, options.key_file, client_ca_file=options.client_ca_file)  # CertError, file named
    from webhook.engine.core import Engine

    Engine.load(options.policies or None, options.config, options.own_namespace)  # raises with every problem
    _WORKER["options"] = options  # inherited by the forked workers (gworker.py reads the limits there)

    settings = {
        "bind": [f"[{options.host}]:{options.port}" if ":" in options.host else f"{options.host}:{options.port}"],
        "workers": options.workers,
        "worker_class": "webhook.app.gworker.AdmissionWorker",  # TLS is done there, per connection
        "worker_connections": options.max_connections,
        "graceful_timeout": max(1, int(round(options.graceful_timeout))),
        "timeout": 30,
        "keepalive": max(1, int(options.keepalive_timeout)),  # non-zero: keep-alive on (gworker times it)
        "limit_request_line": 8190,  # longer: 414 (JSON)
        "limit_request_fields": 100,  # more: 431 (JSON)
        "limit_request_field_size": 8190,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": options.log_level,
        "logger_class": _JsonGunicornLogger.make(),
        "child_exit": lambda arbiter, worker: _child_exit(worker.pid),
        "preload_app": False,
        "control_socket_disable": True,  # one fixed socket path per user: parallel servers would collide
    }
    if os.path.isdir("/dev/shm"):
        settings["worker_tmp_dir"] = "/dev/shm"

    class Application(BaseApplication):
        def load_config(self):
            for key, value in settings.items():
                self.cfg.set(key, value)

        def load(self):
            return build_app(options)

    Application().run()
    return 0


def _child_exit(pid: int) -> None:
    from webhook.app.metrics import mark_process_dead

    try:
        mark_process_dead(pid)
    except Exception:
        pass

