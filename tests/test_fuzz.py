"""Fuzzing (issue 12, item 4): hostile reviews through the real Flask app, hostile manifests through the audit path.

Seeded (derandomized): every run checks the same few hundred cases, so a failure is reproducible and the suite
stays fast (~20 s here); bench/fuzz.py runs thousands with fresh seeds. The properties:
- a review is never answered 5xx, and a review answer always echoes the request's uid;
- loading and evaluating a manifest never raises: bad input becomes an error naming the file, never a traceback.
"""

import json
import os

import pytest

pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402

import fuzzshapes  # noqa: E402
from webhook.app.server import EngineSource, Settings, create_app  # noqa: E402
from webhook.engine.core import Engine  # noqa: E402
from webhook.inputs.sources import load_text  # noqa: E402
from webhook.model.facts import OfflineFacts  # noqa: E402

EXAMPLES = int(os.environ.get("AIADMIT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

_ENGINE = None


def engine() -> Engine:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = Engine.load().prepare()
    return _ENGINE


def check_review(client, review: dict, path: str) -> None:
    """The webhook property, shared with bench/fuzz.py."""
    answer = client.post(path, data=fuzzshapes.review_body(review), content_type="application/json")
    assert answer.status_code < 500, (answer.status_code, answer.data[:300])
    body = json.loads(answer.data)
    if answer.status_code == 200:
        assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
        assert body["response"]["uid"] == review["request"]["uid"]
        assert isinstance(body["response"]["allowed"], bool)
        status = body["response"].get("status") or {}
        assert status.get("code", 200) < 500 or status.get("reason") == "Timeout", status
    else:
        assert "error" in body


def check_manifest(text: str) -> None:
    """The audit property, shared with bench/fuzz.py: load_text + Engine as `aiadmit audit` runs them."""
    loaded = load_text(text, "fuzz.yaml")
    for error in loaded.errors + loaded.skipped:
        assert error.file == "fuzz.yaml" and error.message
    facts = OfflineFacts(loaded.resources)
    for resource in loaded.resources:
        evaluation = engine().evaluate(resource, facts)
        for error in evaluation.errors:
            assert error.file == "fuzz.yaml" and error.line >= 0 and error.message
        for finding in evaluation.findings:
            finding.position()  # line and column of every finding are computable


@pytest.fixture(scope="module")
def client():
    app = create_app(EngineSource(engine()), settings=Settings(budget_seconds=5))
    return app.test_client()


@FUZZ
@given(review=fuzzshapes.reviews())
def test_fuzzed_reviews_never_get_a_5xx_and_always_echo_the_uid(client, review):
    check_review(client, review, "/validate")


@FUZZ
@given(review=fuzzshapes.reviews())
def test_fuzzed_reviews_on_mutate_never_get_a_5xx(client, review):
    check_review(client, review, "/mutate")


@FUZZ
@given(text=fuzzshapes.manifests())
def test_fuzzed_manifests_never_raise(text):
    check_manifest(text)
