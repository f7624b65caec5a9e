"""The engine stops between policies once the caller's deadline has passed."""

import json
import time

import pytest

from webhook.engine.core import BudgetExceeded, Engine
from webhook.model.facts import NoFacts
from webhook.model.resource import Resource

GPU_POD = Resource({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
                    "spec": {"containers": [{"name": "c", "image": "i",
                                             "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})


def test_past_deadline_raises_for_evaluate_and_mutate():
    engine = Engine.load()
    with pytest.raises(BudgetExceeded):
        engine.evaluate(GPU_POD, deadline=time.monotonic() - 1)
    with pytest.raises(BudgetExceeded):
        engine.mutate(GPU_POD, deadline=time.monotonic() - 1)


def test_future_deadline_changes_nothing():
    engine = Engine.load()
    later = time.monotonic() + 60
    assert [f.key() for f in engine.evaluate(GPU_POD, deadline=later).findings] == \
        [f.key() for f in engine.evaluate(GPU_POD).findings]
    assert engine.mutate(GPU_POD, deadline=later).operations == engine.mutate(GPU_POD).operations


def test_a_pod_no_policy_applies_to_never_checks_the_clock():
    plain = Resource({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}})
    assert Engine.load().evaluate(plain, deadline=time.monotonic() - 1).findings == []


# ------------------------------------------------------------------------------------------------ any object size
def _huge_pod(containers: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "big", "namespace": "t", "labels": {"aiadmit.dev/tier": "untrusted"}},
            "spec": {"containers": [{"name": f"c{i}", "image": "x", "securityContext": {"privileged": True},
                                     "resources": {"limits": {"nvidia.com/gpu": 1}}} for i in range(containers)]}}


@pytest.fixture(scope="module")
def full_engine():
    return Engine.load().prepare()


@pytest.mark.parametrize("step", ["validate", "mutate"])
def test_budget_holds_for_30000_containers(full_engine, step, monkeypatch):
    """Issue 12: 30,000 containers were answered after 8.95 s with an 8 s budget (the deny message was quadratic,
    workload building, mutation per container and the patch check had no deadline). Each step checks its deadline
    often enough to stop within 250 ms of its own work past it.

    What this measures is the checks' granularity, so it counts this thread's CPU time: the deadline's clock is the
    thread's (engine/deadline.py reads `time.monotonic` at each check). By the wall clock, a machine at load 10-16
    stretched the same work past the bound (321 and 799 ms measured) without a check less; the server's wall-clock
    budget is held by the test below."""
    import time as clock
    import types

    from serverproc import make_review
    from webhook.app import admission
    from webhook.engine import deadline as deadlines
    from webhook.inputs import review as reviews
    from webhook.inputs.sources import collector_paused

    monkeypatch.setattr(deadlines, "time", types.SimpleNamespace(monotonic=clock.thread_time))
    request = reviews.parse(json.dumps(make_review(_huge_pod(30_000))).encode())
    budget = 1.5
    for _ in range(2):  # the whole of each step, and a second time with everything warm
        # The granularity of the checks, measured without the cyclic collector: its full collections (0.2-0.5 s
        # for the 600,000 maps of the object and its working copy) land anywhere, and the server's reserve is
        # what covers them (below).
        with collector_paused():
            started = clock.thread_time()
            with pytest.raises(BudgetExceeded):
                getattr(admission, step)(full_engine, request, NoFacts(), started + budget)
            overshoot = clock.thread_time() - started - budget
        # Past the last check: freeing what was built (tens of ms).
        assert overshoot < 0.25, f"{step} answered {overshoot * 1000:.0f} ms of CPU past its budget"


def test_server_answers_30000_containers_within_budget(full_engine):
    import time as clock

    from serverproc import make_review
    from webhook.app.server import EngineSource, Settings, create_app

    body = json.dumps(make_review(_huge_pod(30_000)))
    budget = 3.0  # the server keeps a tenth of it for answering: freeing, and the collector's pauses
    # The review bounds (tests/test_review_bounds.py) would refuse it unread: raised here, as an operator may, so
    # that the budget is what stops it.
    client = create_app(EngineSource(full_engine, NoFacts()),
                        settings=Settings(budget_seconds=budget, max_body_bytes=1 << 26, max_nodes=10**7,
                                          max_containers=10**6)).test_client()
    started = clock.perf_counter()
    client.post("/nowhere", data=body, content_type="application/json")  # the test client's own cost of the body
    carrying = clock.perf_counter() - started
    for path in ("/validate", "/mutate"):
        started = clock.perf_counter()
        response = client.post(path, data=body, content_type="application/json")
        took = clock.perf_counter() - started - carrying
        # The answer is out here. What the review built is freed when the response is closed, as a WSGI server
        # does once the bytes are written: that cost (0.1-0.7 s on a loaded machine) is after the answer.
        response.close()
        assert took < budget + 0.1, f"{path}: {took:.3f} s"
        assert response.get_json()["response"]["allowed"] is (path == "/mutate")


def test_collector_resumes_and_the_review_is_freed_once_the_answer_is_out(full_engine):
    """What a review built is kept, and the cyclic collector paused, only until its answer is out: its body read
    to the end (a WSGI server asks for more only once it has sent it) or its response closed (every WSGI server
    closes it, a client gone mid-answer included). Not left paused, and not freed before the answer."""
    import gc

    from serverproc import make_review
    from webhook.app import server
    from webhook.app.server import EngineSource, create_app

    helds = []
    original = server.Held.__init__
    client = create_app(EngineSource(full_engine, NoFacts())).test_client()
    assert gc.isenabled()
    try:
        server.Held.__init__ = lambda held: (original(held), helds.append(held))[0]
        response = client.post("/validate", data=json.dumps(make_review(_huge_pod(3))), content_type="application/json")
    finally:
        server.Held.__init__ = original
    assert response.status_code == 200  # the body is handed over, not yet sent: the client has not asked for more
    [held] = helds
    assert held.objects  # the parsed review, alive until the answer is out
    assert not gc.isenabled()
    response.close()
    assert gc.isenabled()
    assert held.objects == []
    assert response.get_json()["response"]["allowed"] is False
    # A response read to its end resumes the collector without being closed (the test client never closes it).
    response = client.post("/validate", data=json.dumps(make_review(_huge_pod(3))), content_type="application/json")
    assert not gc.isenabled()
    assert response.get_json()["response"]["allowed"] is False
    assert gc.isenabled()
