"""webhook/app/server.py in process (Flask test client): every bad input and every exception path, never a 500."""

import json
import time

import pytest

from serverproc import make_review, slow_configmap, write_slow_policy
from webhook.engine.core import Engine
from webhook.model.facts import NoFacts
from webhook.app.metrics import Metrics
from webhook.language.loader import load_policies
from webhook.app.server import EngineSource, Settings, create_app

from objects import POLICY_FILES, gpu_pod


@pytest.fixture(scope="module")
def engine():
    return Engine.load(POLICY_FILES)


def client_for(engine, settings=None, facts=None, metrics=None):
    source = EngineSource(engine, facts)
    app = create_app(source, metrics or Metrics(), settings or Settings())
    return app.test_client(), source


def post(client, path, body, content_type="application/json", buffered=True):
    """The answer read to its end and closed, as a WSGI server does (`buffered=False`: only its status is read)."""
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post(path, data=data, content_type=content_type, buffered=buffered)


BAD_BODIES = {
    "invalid-json": b"{nope",
    "array": b"[]",
    "empty-object": b"{}",
    "no-request": json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
    "no-uid": json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                          "request": {"operation": "CREATE", "object": {}}}).encode(),
    "deep": b"[" * 20000 + b"]" * 20000,
    "v1beta1": json.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                           "request": {"uid": "x", "operation": "CREATE", "object": {}}}).encode(),
}


@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_bad_bodies_get_400_with_a_json_reason(engine, endpoint, name):
    client, _ = client_for(engine)
    response = post(client, endpoint, BAD_BODIES[name])
    assert response.status_code == 400
    assert response.is_json and response.get_json()["error"]
    assert "Traceback" not in response.get_data(as_text=True)
    assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
def test_object_null_and_containers_string_get_a_valid_review(engine, endpoint):
    client, _ = client_for(engine)
    null = make_review(None)
    null["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    pod = gpu_pod()
    pod["spec"]["containers"] = "train"
    for review in (null, make_review(pod)):
        response = post(client, endpoint, review)
        assert response.status_code == 200
        body = response.get_json()
        assert body["kind"] == "AdmissionReview" and body["response"]["uid"] == review["request"]["uid"]
        if endpoint == "/validate":
            assert body["response"]["allowed"] is False and body["response"]["status"]["code"] == 400


def test_unknown_kind_is_allowed(engine):
    client, _ = client_for(engine)
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ml"}}
    body = post(client, "/validate", make_review(obj)).get_json()
    assert body["response"]["allowed"] is True


def test_wrong_content_type_and_oversized_body(engine):
    client, _ = client_for(engine, Settings(max_body_bytes=2048))
    review = make_review(gpu_pod())
    response = post(client, "/validate", review, content_type="text/plain")
    assert response.status_code == 415 and "application/json" in response.get_json()["error"]
    big = make_review(gpu_pod())
    big["request"]["object"]["metadata"]["annotations"] = {"filler": "x" * 4096}
    response = post(client, "/validate", big)
    assert response.status_code == 413 and response.get_json()["error"]


def test_unknown_route_and_method_are_json(engine):
    client, _ = client_for(engine)
    assert client.get("/nope").status_code == 404 and client.get("/nope").is_json
    response = client.get("/validate")
    assert response.status_code == 405 and response.is_json


def test_budget_exceeded_denies_or_admits_as_configured(tmp_path):
    write_slow_policy(tmp_path, rules=20, size=300)  # ~0.6 s of real CEL
    engine = Engine(load_policies([str(tmp_path)]))
    review = make_review(slow_configmap())
    client, _ = client_for(engine, Settings(budget_seconds=0.15))
    started = time.perf_counter()
    body = post(client, "/validate", review).get_json()
    elapsed = time.perf_counter() - started
    assert body["response"]["allowed"] is False and body["response"]["status"]["code"] == 504
    assert "time budget" in body["response"]["status"]["message"]
    assert elapsed < 0.45, elapsed  # answered at the budget (plus one policy), not after all of them
    lenient, _ = client_for(engine, Settings(budget_seconds=0.15, on_timeout="allow"))
    body = post(lenient, "/validate", review).get_json()
    assert body["response"]["allowed"] is True and "time budget" in body["response"]["warnings"][0]
    body = post(lenient, "/mutate", review).get_json()
    assert body["response"]["allowed"] is True and "patch" not in body["response"]


class ExplodingEngine(Engine):
    """The real engine whose evaluate/mutate raise: the paths a bug in a policy function would take."""

    def evaluate(self, resource, facts=None, deadline=None, in_tree=True):
        raise KeyError("boom")

    def mutate(self, resource, facts=None, deadline=None, skip=frozenset(), in_tree=True):
        raise RecursionError("deep")


def test_exceptions_inside_a_review_fail_closed_on_validate_and_open_on_mutate():
    engine = ExplodingEngine(load_policies(POLICY_FILES))
    metrics = Metrics()
    client, _ = client_for(engine, metrics=metrics)
    review = make_review(gpu_pod())
    validate = post(client, "/validate", review)
    assert validate.status_code == 200
    assert validate.get_json()["response"]["allowed"] is False
    assert validate.get_json()["response"]["status"]["code"] == 500
    mutate = post(client, "/mutate", review)
    assert mutate.status_code == 200 and mutate.get_json()["response"]["allowed"] is True
    assert "too deeply" in mutate.get_json()["response"]["warnings"][0]
    text = client.get("/metrics").get_data(as_text=True)
    assert 'aiadmit_internal_errors_total{endpoint="validate"} 1.0' in text
    assert 'aiadmit_internal_errors_total{endpoint="mutate"} 1.0' in text


def test_no_engine_is_not_ready_and_fails_closed():
    client, _ = client_for(None)
    assert client.get("/readyz").status_code == 503
    body = post(client, "/validate", make_review(gpu_pod())).get_json()
    assert body["response"]["allowed"] is False


class Unsynced(NoFacts):
    def __init__(self):
        self.done = False

    def synced(self):
        return self.done

    def ages(self):
        return {"namespaces": None if not self.done else 1.5}


def test_readyz_waits_for_context_caches(engine):
    facts = Unsynced()
    client, _ = client_for(engine, facts=facts)
    response = client.get("/readyz")
    assert response.status_code == 503 and "not synced" in response.get_json()["reason"]
    assert 'aiadmit_context_cache_age_seconds{resource="namespaces"} -1.0' in client.get("/metrics").get_data(
        as_text=True)
    facts.done = True
    assert client.get("/readyz").status_code == 200
    assert 'aiadmit_context_cache_age_seconds{resource="namespaces"} 1.5' in client.get("/metrics").get_data(
        as_text=True)


def test_metrics_count_requests_findings_and_generation(engine):
    metrics = Metrics()
    client, source = client_for(engine, metrics=metrics)
    post(client, "/validate", json.load(open("examples/pytorchjob-gpu.json")))
    post(client, "/mutate", json.load(open("examples/pytorchjob-gpu.json")))
    post(client, "/validate", b"[]")
    source.swap(Engine.load(POLICY_FILES))
    text = client.get("/metrics").get_data(as_text=True)
    assert ('aiadmit_admission_requests_total{endpoint="validate",kind="PyTorchJob",operation="CREATE",'
            'outcome="denied"} 1.0') in text
    assert 'aiadmit_findings_total{action="deny",policy="shm-sized",result="fail"}' in text
    assert 'aiadmit_mutations_total{policy="shm-sized"} 1.0' in text
    assert 'aiadmit_bad_requests_total{endpoint="validate",reason="invalid-review"} 1.0' in text
    assert "aiadmit_policy_set_generation 1.0" in text
    assert 'aiadmit_admission_duration_seconds_bucket{endpoint="validate",le="0.01"}' in text


def test_logs_carry_coordinates_never_contents(engine, caplog):
    client, _ = client_for(engine)
    secret = [{"name": "HF_TOKEN", "value": "hf_s3cr3t-v4lue"}]
    review = make_review(gpu_pod(shm=False, env=secret), uid="log-uid-1")
    with caplog.at_level("INFO", logger="aiadmit"):
        post(client, "/validate", review)
    records = [r for r in caplog.records if getattr(r, "fields", {}).get("uid") == "log-uid-1"]
    assert len(records) == 1
    fields = records[0].fields
    assert fields["kind"] == "Pod" and fields["namespace"] == "ml" and fields["name"] == "train"
    assert fields["operation"] == "CREATE" and fields["outcome"] == "denied" and fields["duration_ms"] > 0
    assert "hf_s3cr3t" not in caplog.text + json.dumps(fields) and "HF_TOKEN" not in json.dumps(fields)


def test_a_review_past_its_budget_resumes_the_collector_once_its_answer_is_out(tmp_path):
    """What the engine built before its deadline is kept until the answer is out, then freed with the collector
    resumed: once the body is read to its end, or the response is closed unread."""
    import gc

    write_slow_policy(tmp_path, rules=20, size=300)
    engine = Engine(load_policies([str(tmp_path)]))
    was = gc.isenabled()
    gc.enable()  # this test's own starting point: a review pauses only a running collector
    try:
        for on_timeout in ("deny", "allow"):
            client, _ = client_for(engine, Settings(budget_seconds=0.15, on_timeout=on_timeout))
            response = post(client, "/validate", make_review(slow_configmap()), buffered=False)
            assert not gc.isenabled()  # paused from parsing until the answer is out
            assert "time budget" in json.dumps(response.get_json()["response"])
            assert gc.isenabled(), on_timeout
            response = post(client, "/validate", make_review(slow_configmap()), buffered=False)
            assert not gc.isenabled()
            response.close()
            assert gc.isenabled(), on_timeout
    finally:
        if not was:
            gc.disable()


@pytest.mark.parametrize("finish", ["read", "close"])
def test_a_log_handler_keeping_a_reviews_exception_does_not_keep_the_collector_paused(finish):
    """A handler that keeps records (logging's MemoryHandler, a buffering or error-reporting handler, pytest's
    capture) keeps the exception's traceback, whose frames link up through their callers (f_back) to the ones
    holding the answer: the collector must resume when the answer is out, not when the answer is freed."""
    import gc
    import logging.handlers

    keeping = logging.handlers.MemoryHandler(capacity=100, flushLevel=logging.CRITICAL + 1)
    logger = logging.getLogger("aiadmit")
    client, _ = client_for(ExplodingEngine(load_policies(POLICY_FILES)))
    was = gc.isenabled()
    gc.enable()
    logger.addHandler(keeping)
    try:
        response = post(client, "/validate", make_review(gpu_pod()), buffered=False)
        assert not gc.isenabled()  # paused from parsing until the answer is out
        if finish == "read":
            assert response.get_json()["response"]["status"]["code"] == 500
        else:
            response.close()
        del response
        [record] = [r for r in keeping.buffer if r.getMessage() == "evaluation failed"]
        assert record.exc_info[2] is not None  # the handler still holds the traceback, and so the answer
        assert gc.isenabled(), finish
    finally:
        logger.removeHandler(keeping)
        keeping.buffer.clear()
        if not was:
            gc.disable()


@pytest.mark.parametrize("path", ["/validate", "/mutate"])
def test_a_bad_field_kept_with_its_traceback_does_not_keep_the_collector_paused(engine, path):
    """A field of the wrong shape is kept as the ShapeError raised for it, traceback and all, in what the engine
    built (Workload.errors): its frames' locals hold that list again, a cycle that only the collector frees, and
    their callers' frames hold the answer. The collector must resume once the answer is out all the same."""
    import gc

    pod = gpu_pod()
    pod["spec"]["volumes"] = {"dshm": {"emptyDir": {}}}  # a map where Kubernetes has a list
    client, _ = client_for(engine)
    was = gc.isenabled()
    gc.enable()
    try:
        response = post(client, path, make_review(pod), buffered=False)
        assert not gc.isenabled()
        assert response.get_json()["response"]["uid"]
        del response
        assert gc.isenabled(), path
    finally:
        if not was:
            gc.disable()
