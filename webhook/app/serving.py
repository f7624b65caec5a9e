"""Production serving: gunicorn (gthread workers) over TLS, with certificate and policy reload.

Why gunicorn gthread: the engine is CPU-bound Python, so parallelism comes from
processes (one per core); a few threads per worker overlap TLS and socket I/O
and keep a slow review from blocking the others. bench/RESULTS.md has the
figures ("Webhook under load").

TLS: gunicorn 27's gthread worker asks the `ssl_context` server hook for a
context on *every* accepted connection. Our hook returns a cached context,
built once, that `TLSFiles` replaces when `--cert-file`/`--key-file` change on
disk (checked at most every `--reload-interval` seconds, on the accepting
path). New connections get the new certificate; open connections finish on
the old one; a half-written pair that fails to load is logged, counted and
ignored until the files change again. Only TLS 1.2 and 1.3 are offered.

Policies and config: each worker polls the modification signature of the
policy files and the config file; on change it loads a complete new engine
and swaps it in with one assignment (server.EngineSource.swap). A set that
fails to load is logged with every problem, counted
(`aiadmit_policy_reloads_total{outcome="failure"}`), and the old set keeps
serving.

Shutdown: SIGTERM makes gunicorn stop accepting and lets each worker finish
its in-flight reviews (up to `graceful_timeout`).
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from webhook.app.certs import CertError, read_pair
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.loader import policy_files

log = logging.getLogger("aiadmit.serving")


def _signature(paths: list[str]) -> tuple:
    """What changes when any of `paths` is replaced or rewritten (follows symlinks: Kubernetes volumes swap them)."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append((path, st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((path, None))
    return tuple(out)


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server SSLContext for the pair: TLS 1.2+ only, OpenSSL's secure default ciphers, no compression."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.load_cert_chain(certfile=cert_file, keyfile=key_file)
    return context


class TLSFiles:
    """The current SSLContext of a certificate/key pair, rebuilt when the files change."""

    def __init__(self, cert_file: str, key_file: str, interval: float = 5.0,
                 on_reload: Optional[Callable[[str], None]] = None):
        self.cert_file, self.key_file, self.interval = cert_file, key_file, interval
        self.on_reload = on_reload or (lambda outcome: None)
        self._lock = threading.Lock()
        self._checked = time.monotonic()
        self._signature = _signature([cert_file, key_file])
        self._context = self._build()  # raises CertError: a server must not start without a usable pair
        self.pid = os.getpid()

    def _build(self) -> ssl.SSLContext:
        read_pair(self.cert_file, self.key_file)  # clear errors (file, mismatch) before OpenSSL's terse ones
        try:
            return server_context(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as exc:
            raise CertError(f"{self.cert_file}/{self.key_file}: {exc}") from None

    def context(self) -> ssl.SSLContext:
        if time.monotonic() - self._checked >= self.interval:
            self.check()
        return self._context

    def check(self) -> bool:
        """Reload if the files changed; True when a new context was installed."""
        with self._lock:
            self._checked = time.monotonic()
            signature = _signature([self.cert_file, self.key_file])
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
    threads: int = 4
    reload_interval: float = 5.0
    budget_seconds: float = 8.0
    max_body_bytes: int = 6 * 1024 * 1024
    on_timeout: str = "deny"
    graceful_timeout: float = 25.0
    context_files: list[str] = field(default_factory=list)
    kubeconfig: Optional[str] = None
    in_cluster: bool = False
    facts_max_age: float = 120.0
    log_level: str = "info"


class PolicyReloader:
    """Polls the policy and config files; swaps in a fully loaded engine when they change."""

    def __init__(self, options: ServeOptions, source, metrics):
        self.options, self.source, self.metrics = options, source, metrics
        self._signature = self.signature()
        self._stop = threading.Event()

    def watched(self) -> list[str]:
        paths = list(self.options.policies or [BUILTIN_POLICY_DIR])
        files = policy_files(paths)
        return sorted(set(files + paths + ([self.options.config] if self.options.config else [])))

    def signature(self) -> tuple:
        try:
            return _signature(self.watched())
        except OSError:
            return ()

    def check(self) -> Optional[bool]:
        """None: nothing changed; True: new set serving; False: new set rejected."""
        signature = self.signature()
        if signature == self._signature:
            return None
        self._signature = signature
        from webhook.language.config import ConfigError
        from webhook.engine.core import Engine
        from webhook.language.policy import PolicyLoadError

        try:
            engine = Engine.load(self.options.policies or None, self.options.config,
                                 self.options.own_namespace).prepare()  # compiled here, not in reviews
        except (PolicyLoadError, ConfigError) as exc:
            problems = exc.problems
        except Exception as exc:  # anything else a broken file can provoke
            problems = [f"{type(exc).__name__}: {exc}"]
        else:
            self.source.swap(engine)
            self.metrics.reloads.labels("success").inc()
            self.metrics.generation.set(self.source.generation)
            self.metrics.policies.set(len(engine.policies))
            log.info("policy set reloaded", extra={"fields": {"generation": self.source.generation,
                                                              "policies": len(engine.policies)}})
            return True
        self.metrics.reloads.labels("failure").inc()
        log.error("policy reload rejected; the previous set keeps serving",
                  extra={"fields": {"generation": self.source.generation, "problems": problems[:20]}})
        return False

    def start(self) -> None:
        def loop():
            while not self._stop.wait(self.options.reload_interval):
                try:
                    self.check()
                except Exception:
                    log.exception("policy reload check failed")

        threading.Thread(target=loop, name="aiadmit-reload", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


def build_facts(options: ServeOptions):
    """Offline facts from --context files, live facts from a kubeconfig or the pod's service account, or none."""
    from webhook.model.facts import NoFacts, OfflineFacts

    if options.context_files:
        from webhook.inputs.sources import load_paths

        loaded = load_paths(options.context_files)
        return OfflineFacts(loaded.resources)
    if options.kubeconfig or options.in_cluster:
        from kubernetes import client, config

        if options.kubeconfig:
            api = config.new_client_from_config(config_file=options.kubeconfig)
        else:
            config.load_incluster_config()
            api = client.ApiClient()
        from webhook.inputs.livefacts import LiveFacts

        return LiveFacts(api, max_age=options.facts_max_age).start()
    return NoFacts()


def build_app(options: ServeOptions):
    """The Flask app of one worker: engine, facts, metrics, reloader."""
    from webhook.engine.core import Engine
    from webhook.app.metrics import Metrics
    from webhook.app.server import EngineSource, Settings, create_app, setup_logging

    setup_logging(getattr(logging, options.log_level.upper(), logging.INFO))
    metrics = Metrics()
    engine = Engine.load(options.policies or None, options.config, options.own_namespace).prepare()
    source = EngineSource(engine, build_facts(options))
    settings = Settings(budget_seconds=options.budget_seconds, max_body_bytes=options.max_body_bytes,
                        on_timeout=options.on_timeout)
    app = create_app(source, metrics, settings)
    PolicyReloader(options, source, metrics).start()
    _WORKER["metrics"] = metrics
    return app


_WORKER: dict = {}  # per process: the TLSFiles and Metrics of this worker


def _ssl_context_hook(options: ServeOptions):
    def hook(conf, default_factory):
        tls = _WORKER.get("tls")
        if tls is None or tls.pid != os.getpid():  # first connection of this worker
            def counted(outcome: str) -> None:
                if _WORKER.get("metrics") is not None:
                    _WORKER["metrics"].cert_reloads.labels(outcome).inc()

            tls = _WORKER["tls"] = TLSFiles(options.cert_file, options.key_file, options.reload_interval,
                                            counted)
        return tls.context()
    return hook


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

    TLSFiles(options.cert_file, options.key_file)  # raises CertError with the file named
    from webhook.engine.core import Engine

    Engine.load(options.policies or None, options.config, options.own_namespace)  # raises with every problem

    settings = {
        "bind": [f"[{options.host}]:{options.port}" if ":" in options.host else f"{options.host}:{options.port}"],
        "workers": options.workers,
        "worker_class": "gthread",
        "threads": options.threads,
        "certfile": options.cert_file,
        "keyfile": options.key_file,
        "ssl_context": _ssl_context_hook(options),
        "graceful_timeout": max(1, int(round(options.graceful_timeout))),
        "timeout": 30,
        "keepalive": 75,  # the API server keeps connections to webhooks open; don't make it re-handshake
        "limit_request_line": 8190,
        "limit_request_fields": 100,
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


def describe(options: ServeOptions) -> str:
    return json.dumps({"msg": "serving", "url": f"https://{options.host}:{options.port}",
                       "workers": options.workers, "threads": options.threads})
