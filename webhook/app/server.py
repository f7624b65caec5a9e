"""The webhook's HTTP surface: a Flask app factory, no TLS and no process model (see serving.py).

Routes: `POST /validate`, `POST /mutate` (AdmissionReview admission.k8s.io/v1),
`GET /healthz`, `GET /readyz`, `GET /metrics`.

Safety rules every route follows:
- no answer is ever a 500 or a traceback: a request we cannot read is a 4xx
  with a JSON `{"error": reason}`; a review that breaks something inside is
  answered as a review (validate fails closed, mutate admits unpatched) and
  counted in `aiadmit_internal_errors_total`;
- a review is evaluated with a deadline (the time budget), checked by the engine
  between policies: the API server must hear from us before its own
  `timeoutSeconds`, and when the budget is spent the answer follows the
  configured timeout action;
- logs are JSON lines with the review's coordinates, never its contents.
"""

from __future__ import annotations

import gc
import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Optional

from flask import Flask, Response, request
from werkzeug.exceptions import ClientDisconnected, HTTPException, RequestEntityTooLarge
from werkzeug.http import parse_options_header
from werkzeug.wsgi import get_input_stream

from webhook.app import admission
from webhook.app.answer import Answer, encode
from webhook.inputs import bounds
from webhook.inputs import review as reviews
from webhook.outputs import response as responses
from webhook.engine.core import BudgetExceeded, Engine
from webhook.model.facts import ClusterFacts, NoFacts
from webhook.app.metrics import Metrics

log = logging.getLogger("aiadmit.webhook")

DEFAULT_BUDGET_SECONDS = 8.0  # under the default timeoutSeconds (10); manifests/ pair timeoutSeconds 5 with --budget 4
RESERVE_SHARE, MAX_RESERVE_SECONDS = 0.1, 0.5  # of the budget, kept for answering after the engine stops
DEFAULT_MAX_BODY_BYTES = 6 * 1024 * 1024  # object + oldObject of the largest object etcd stores (1.5 MiB) x2, JSON


@dataclass
class Settings:
    budget_seconds: float = DEFAULT_BUDGET_SECONDS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    on_timeout: str = "deny"  # deny | allow: what /validate answers when the budget is spent
    max_nodes: int = bounds.MAX_NODES  # JSON values and keys per review, counted before decoding (inputs/bounds.py)
    max_containers: int = bounds.MAX_CONTAINERS  # containers per object, counted before the engine


class EngineSource:
    """The engine being served and the facts it reads; `swap` replaces the engine in one assignment."""

    def __init__(self, engine: Optional[Engine], facts: Optional[ClusterFacts] = None):
        self.engine = engine
        self.facts = facts or NoFacts()
        self.generation = 0

    def swap(self, engine: Engine) -> None:
        engine.generation = self.generation + 1
        self.engine = engine  # readers take one reference per review: old reviews finish on the old set
        self.generation += 1

    def ready(self) -> tuple[bool, str]:
        if self.engine is None:
            return False, "policies not loaded"
        synced = getattr(self.facts, "synced", None)
        if synced is not None and not synced():
            return False, "cluster context caches not synced yet"
        return True, "ok"


_ENCODE = json.JSONEncoder(default=str).encode  # json.dumps(..., default=str) without building an encoder per line


class JsonFormatter(logging.Formatter):
    """One JSON object per line; structured fields come from `extra={"fields": {...}}`."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
                 "msg": record.getMessage()}
        entry.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return _ENCODE(entry)


def setup_logging(level: int = logging.INFO) -> None:
    root = logging.getLogger("aiadmit")
    if not any(getattr(h, "_aiadmit", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        handler._aiadmit = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False


class Held:
    """What one review built, kept from its evaluation until its answer has been sent, with the collector paused.

    Python's cyclic collector is paused from parsing on: a review's objects die by reference counting, and a huge
    one (30,000 containers: 600,000 maps, a working copy, findings) set off 5-8 full collections of up to 0.19 s
    each, a third of its budget. Freeing what it built, and the collection that resuming starts while it is still
    alive, cost another 0.1-0.7 s on a loaded machine after the engine had stopped at its deadline, and made the
    answer late (CI, tests/test_engine_deadline.py). Both now happen once the answer is out: `release` runs when
    its body has been sent or the response closes, whichever comes first (answer.py). A review does not yield to
    other greenlets between parsing and its answer (the body is already read), so the collector is paused only
    for that and for writing answers: cycles wait that long.
    """

    def __init__(self):
        self.objects: list = []
        self.resume = False

    def pause(self) -> None:
        if gc.isenabled():  # paused already: by a review still writing its answer, or by the process itself
            gc.disable()
            self.resume = True

    def keep(self, thing) -> None:
        self.objects.append(thing)

    def release(self) -> None:
        self.objects.clear()
        if self.resume:
            self.resume = False
            gc.enable()


def _built(exc: BaseException) -> list:
    """The locals of the frames an exception interrupted below the one handling it, without the frames.

    They hold what the engine built before its deadline, which takes long to free (Held). The traceback itself
    is not kept: each of its frames links back to its caller's (`f_back`), up through the frames that hold the
    answer and the WSGI server's, all kept alive until the answer is out."""
    kept = []
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    while tb is not None:
        kept.append(tb.tb_frame.f_locals)
        tb = tb.tb_next
    return kept


def _json(data: dict, status: int = 200) -> Response:
    return Response(encode(data), status=status, mimetype="application/json")


def create_app(source: EngineSource, metrics: Optional[Metrics] = None, settings: Optional[Settings] = None) -> Flask:
    settings = settings or Settings()
    metrics = metrics or Metrics()
    app = Flask("aiadmit")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions["aiadmit"] = {"source": source, "metrics": metrics, "settings": settings}

    def bad(endpoint: str, status: int, reason: str, code: str) -> Answer:
        metrics.bad_requests.labels(endpoint, code).inc()
        log.info("bad request", extra={"fields": {"endpoint": endpoint, "status": status, "reason": reason[:200]}})
        return Answer({"error": reason, "status": status}, status)

    def review(endpoint: str, environ: dict) -> Answer:
        started = time.perf_counter()
        held = Held()
        try:
            answer = _review(endpoint, environ, started, held)
        except BaseException:  # no answer to release it (a worker's timeout, an exit): the request ends here
            held.release()
            raise
        # Released when the answer is out (answer.py), never when it is freed: whatever keeps a traceback from
        # this review (a log handler's records, an exception stored in what the engine built) reaches the answer
        # through its frames' callers (f_back, up to this frame and the WSGI server's), so a release on freeing
        # waited on that handler, or for good on a cycle that only the paused collector would free.
        answer.call_on_close(held.release)
        return answer

    def _review(endpoint: str, environ: dict, started: float, held: Held) -> Answer:
        parsed = None
        try:
            # what Flask's request.mimetype and request.get_data(cache=False) are, without a request object: the
            # body bound (MAX_CONTENT_LENGTH, 413 before a byte is read when Content-Length is over it) and the
            # short-body check (ClientDisconnected) are werkzeug's own, in get_input_stream
            mimetype = parse_options_header(environ.get("CONTENT_TYPE", ""))[0].lower()
            if mimetype != "application/json":
                return bad(endpoint, 415, f"content type must be application/json, got {mimetype!r}",
                           "content-type")
            try:
                body = get_input_stream(environ, max_content_length=settings.max_body_bytes).read()
            except RequestEntityTooLarge:
                return bad(endpoint, 413, f"request body over {settings.max_body_bytes} bytes", "too-large")
            except ClientDisconnected:  # the server's body time-out, or the client went away mid-body
                return bad(endpoint, 400, "request body incomplete: the client stopped sending or was too slow",
                           "body-incomplete")
            # The cost bound (inputs/bounds.py): an absurd shape is refused before it is decoded or evaluated, so
            # that it costs milliseconds and little memory, not the worker's whole budget.
            problem = bounds.body_problem(body, settings.max_nodes)
            if problem is not None:
                return refused(endpoint, body, problem, started)
            held.pause()
            try:
                parsed = reviews.parse(body)
                held.keep(parsed)
            except reviews.ReviewError as exc:
                return bad(endpoint, exc.status, exc.reason, "invalid-review")
            problem = bounds.shape_problem(parsed, body, settings.max_containers)
            if problem is not None:
                outcome = responses.deny(parsed, f"aiadmit: {problem}", code=413, outcome="refused")
            else:
                outcome = _evaluate(endpoint, parsed, started, held)
        except Exception as exc:  # the last line of defence: never a 500
            log.exception("internal error", extra={"fields": {"endpoint": endpoint}})
            metrics.internal_errors.labels(endpoint).inc()
            if parsed is None:
                return Answer({"error": f"internal error: {type(exc).__name__}"}, 400)
            outcome = responses.error_outcome(parsed, endpoint, f"internal error: {type(exc).__name__}")
        seconds = time.perf_counter() - started
        try:
            metrics.observe(endpoint, outcome, seconds)
            _log(endpoint, outcome, seconds)
        except Exception:  # metrics and logs must not turn an answer into an error
            pass
        return Answer(outcome.body)

    def refused(endpoint: str, body: bytes, problem: str, started: float) -> Answer:
        """A body refused unread: a review's denial when its uid is readable at its head, else HTTP 413."""
        uid = bounds.head_uid(body)
        if uid is None:
            return bad(endpoint, 413, problem, "over-bound")
        outcome = responses.deny({"uid": uid}, f"aiadmit: {problem}", code=413, outcome="refused")
        seconds = time.perf_counter() - started
        metrics.observe(endpoint, outcome, seconds)
        _log(endpoint, outcome, seconds)
        return Answer(outcome.body)

    def _evaluate(endpoint: str, parsed: dict, started: float, held: Held) -> responses.Outcome:
        engine, facts = source.engine, source.facts
        if engine is None:
            return responses.error_outcome(parsed, endpoint, "policies not loaded")
        work = admission.validate if endpoint == "validate" else admission.mutate
        # The deadline is checked between policies in the request's own thread: a CEL program holds the GIL to
        # its end anyway, so a watchdog thread could answer no sooner, and this stops the work instead of leaving
        # it running in the background (and saves a thread hand-off per review, ~0.2 ms measured).
        # The engine stops a reserve before the budget: what a huge object's evaluation built (360,000 findings
        # for 30,000 containers, a working copy) takes tens of milliseconds to free after it stops, and the answer
        # must still be out within the budget (tests/test_engine_deadline.py).
        reserve = min(MAX_RESERVE_SECONDS, settings.budget_seconds * RESERVE_SHARE)
        deadline = time.monotonic() + settings.budget_seconds - reserve - (time.perf_counter() - started)
        try:
            return work(engine, parsed, facts, deadline)
        except BudgetExceeded as exc:
            held.keep(_built(exc))  # what the engine's frames built, freed after the answer
            metrics.timeouts.labels(endpoint).inc()
            reason = f"evaluation exceeded the {settings.budget_seconds:g}s time budget"
            if endpoint == "mutate":
                return responses.allow(parsed, "timeout", responses.fit_warnings([f"aiadmit: not mutated: {reason}"]))
            if settings.on_timeout == "allow":
                return responses.allow(parsed, "timeout", responses.fit_warnings([f"aiadmit: not checked: {reason}"]))
            return responses.deny(parsed, f"aiadmit: {reason}; retry, or ask the cluster admins", code=504,
                                  outcome="timeout")
        except RecursionError:
            metrics.internal_errors.labels(endpoint).inc()
            return responses.error_outcome(parsed, endpoint, "object nests too deeply to check")
        except Exception as exc:
            log.error("evaluation failed", exc_info=True, extra={"fields": {"endpoint": endpoint,
                                                                            "uid": parsed.get("uid")}})
            metrics.internal_errors.labels(endpoint).inc()
            return responses.error_outcome(parsed, endpoint, f"internal error: {type(exc).__name__}")

    # Registered so that Flask answers what is not a review as before (GET /validate: 405; /validate/: 308);
    # the reviews themselves take the path below and never reach these views.
    @app.post("/validate")
    def validate() -> Answer:
        return review("validate", request.environ)

    @app.post("/mutate")
    def mutate() -> Answer:
        return review("mutate", request.environ)

    # The review path: `POST /validate` and `POST /mutate` go straight from the WSGI call to `review`, without
    # Flask's per-request machinery (request and application contexts, URL matching, signals, the session,
    # response processing; measured: bench/RESULTS.md, 2026-12-07, h-serve). None of it serves a review: the body
    # is read with the same bound, `_review` answers every failure itself, and every other method or path (the
    # probes, /metrics, GET /validate, /validate/) goes to Flask as before.
    routed = {"/validate": "validate", "/mutate": "mutate"}
    flask_wsgi = app.wsgi_app

    def wsgi_app(environ: dict, start_response):
        endpoint = routed.get(environ.get("PATH_INFO"))
        if endpoint is None or environ.get("REQUEST_METHOD") != "POST":
            return flask_wsgi(environ, start_response)
        try:
            answer = review(endpoint, environ)
        except Exception as exc:  # pragma: no cover - _review answers its own; this guards the path itself
            log.exception("unhandled error")
            answer = Answer({"error": f"internal error: {type(exc).__name__}"}, 400)
        return answer(environ, start_response)

    app.wsgi_app = wsgi_app  # type: ignore[method-assign]

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        ok, why = source.ready()
        body = {"status": "ok" if ok else "not ready", "reason": why, "generation": source.generation}
        return _json(body, 200 if ok else 503)

    @app.get("/metrics")
    def metrics_route() -> Response:
        try:
            update_gauges(source, metrics)
            return Response(metrics.render(), mimetype=metrics.content_type.split(";")[0],
                            headers={"Content-Type": metrics.content_type})
        except Exception as exc:
            log.exception("metrics failed")
            return _json({"error": f"metrics unavailable: {type(exc).__name__}"}, 503)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        return _json({"error": exc.description or exc.name, "status": exc.code}, exc.code or 400)

    @app.errorhandler(Exception)
    def any_error(exc: Exception):  # pragma: no cover - routes catch their own; this guards Flask itself
        log.exception("unhandled error")
        return _json({"error": f"internal error: {type(exc).__name__}"}, 400)

    update_gauges(source, metrics)
    return app


def update_gauges(source: EngineSource, metrics: Metrics) -> None:
    metrics.generation.set(source.generation)
    metrics.policies.set(len(source.engine.policies) if source.engine else 0)
    ages = getattr(source.facts, "ages", None)
    if ages is not None:
        for name, age in ages().items():
            metrics.cache_age.labels(name).set(-1 if age is None else age)


def _log(endpoint: str, outcome: responses.Outcome, seconds: float) -> None:
    fields = {"endpoint": endpoint, "uid": outcome.uid, "kind": outcome.kind, "namespace": outcome.namespace,
              "name": outcome.name, "operation": outcome.operation, "dry_run": outcome.dry_run,
              "outcome": outcome.outcome, "duration_ms": round(seconds * 1000, 3)}
    if outcome.denied_policies:
        fields["denied"] = outcome.denied_policies
    if outcome.patched_policies:
        fields["patched"] = outcome.patched_policies
    warned = sorted({f.policy for f in outcome.findings if f.action == "warn"})
    if warned:
        fields["warned"] = warned
    if outcome.exemptions:  # the audit trail of exemptions: which policy was not checked, and by what
        fields["exempted"] = outcome.exemptions
    if outcome.problems:
        fields["problems"] = [p[:300] for p in outcome.problems]
    if log.isEnabledFor(logging.INFO):
        # log.info() without its findCaller: a walk up the stack, once per review, for a file and line that the
        # JSON line never shows. Filters, handlers and propagation are the logger's own (Logger.handle).
        log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, "review", (), None, extra={"fields": fields}))
