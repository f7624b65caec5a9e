"""The cost bound of one review (issue 21, invariant (f)): an absurd shape is refused early, cheaply and with a
clear message; everything a real object can be is checked as before. CPU is measured with thread_time (this
thread's CPU, not the wall clock of a shared machine), memory with tracemalloc."""

import json
import random
import time
import tracemalloc

import pytest

from serverproc import make_review
from webhook.app.server import EngineSource, Settings, create_app
from webhook.engine.core import Engine
from webhook.inputs import bounds
from webhook.model.facts import NoFacts


def gpu_pod(containers: int, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "t"},
            "spec": {"containers": [{"name": f"c{i}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                                    for i in range(containers)], **spec}}


@pytest.fixture(scope="module")
def client():
    engine = Engine.load().prepare()
    return create_app(EngineSource(engine, NoFacts()), settings=Settings(budget_seconds=4)).test_client()


def post(client, path: str, body: bytes):
    cpu = time.thread_time()
    answer = client.post(path, data=body, content_type="application/json")
    return answer, time.thread_time() - cpu


def dumps(review: dict) -> bytes:
    return json.dumps(review, separators=(",", ":")).encode()


# ------------------------------------------------------------------------------------------------ the attacks
@pytest.mark.parametrize("path", ["/validate", "/mutate"])
def test_twenty_thousand_tiny_gpu_containers_are_refused_in_milliseconds(client, path):
    """The issue's attack: a 1.5 MB review of 20,000 tiny GPU containers held a worker for the whole 4 s budget."""
    review = make_review(gpu_pod(20_000))
    body = dumps(review)
    assert len(body) > 1_400_000
    answer, cpu = post(client, path, body)
    response = answer.get_json()["response"]
    assert answer.status_code == 200 and response["uid"] == review["request"]["uid"]
    assert response["allowed"] is False and response["status"]["code"] == 413
    assert "over aiadmit's bound of 200,000 per review" in response["status"]["message"]
    assert cpu < 0.5, f"refusing took {cpu:.3f} s of CPU (evaluating it takes over a second)"


@pytest.mark.parametrize("path", ["/validate", "/mutate"])
def test_containers_under_the_value_bound_are_refused_before_the_engine(client, path):
    review = make_review(gpu_pod(bounds.MAX_CONTAINERS + 1))
    answer, _ = post(client, path, dumps(review))
    response = answer.get_json()["response"]
    assert response["allowed"] is False and response["status"]["code"] == 413
    assert response["status"]["message"] == (
        "aiadmit: request.object has more than 500 containers, over aiadmit's bound per object (real pods have a "
        "few dozen at most): refused unchecked")


def test_an_update_whose_old_object_is_over_the_bound_names_it(client):
    old = gpu_pod(bounds.MAX_CONTAINERS + 1)
    review = make_review(gpu_pod(1), operation="UPDATE", old=old)
    response = post(client, "/validate", dumps(review))[0].get_json()["response"]
    assert "request.oldObject has more than 500 containers" in response["status"]["message"]


def test_init_and_ephemeral_containers_and_every_template_count(client):
    half = bounds.MAX_CONTAINERS // 2
    pod = gpu_pod(half, initContainers=[{"name": f"i{i}", "image": "x"} for i in range(half)],
                  ephemeralContainers=[{"name": "e", "image": "x"}])
    response = post(client, "/validate", dumps(make_review(pod)))[0].get_json()["response"]
    assert "more than 500 containers" in response["status"]["message"]
    template = {"spec": gpu_pod(half)["spec"]}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "t"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template},
                                            "Worker": {"replicas": 4,
                                                       "template": {"spec": gpu_pod(half + 1)["spec"]}}}}}
    response = post(client, "/validate", dumps(make_review(job)))[0].get_json()["response"]
    assert "more than 500 containers" in response["status"]["message"]


@pytest.mark.parametrize("path", ["/validate", "/mutate"])
def test_two_million_empty_lists_are_refused_unread_without_the_memory(client, path):
    """The issue's other attack: a 5.9 MB /mutate review of two million empty lists took a worker from 55 to 473 MiB
    (decoding alone makes 129 MiB of lists). Refused before decoding: what it costs is a copy of the body or two."""
    pod = gpu_pod(1)
    pod["spec"]["x"] = [[] for _ in range(2_000_000)]
    body = dumps(make_review(pod))
    assert len(body) > 5_900_000
    tracemalloc.start()
    try:
        answer, cpu = post(client, path, body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    response = answer.get_json()["response"]
    assert response["allowed"] is False and "4,000,0" in response["status"]["message"], response
    assert peak < 4 * len(body), f"refusing it took {peak / 2**20:.0f} MiB"
    assert cpu < 0.5


def test_a_body_over_the_bound_without_a_readable_uid_is_a_413(client):
    body = b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"object":' + \
        b"[" + b",".join([b"[]"] * 300_000) + b"]}}"
    answer = client.post("/validate", data=body, content_type="application/json")
    assert answer.status_code == 413
    assert "over aiadmit's bound of 200,000" in answer.get_json()["error"]


# ------------------------------------------------------------------------------------------------ real objects pass
def test_a_pod_at_the_container_bound_is_checked(client):
    response = post(client, "/validate", dumps(make_review(gpu_pod(bounds.MAX_CONTAINERS))))[0].get_json()["response"]
    assert response["allowed"] is False and response["status"]["code"] == 403  # judged by the policies
    assert "policies failed" in response["status"]["message"]


def test_a_configmap_holding_a_large_json_document_is_not_refused(client):
    """Separators inside strings are not nodes: a dashboard's JSON in a ConfigMap, 420,000 of them in one string."""
    document = json.dumps([{"a": i, "b": [1, 2]} for i in range(60_000)])
    assert sum(document.count(c) for c in "[{,:") > 2 * bounds.MAX_NODES
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dash", "namespace": "t"},
                 "data": {"dashboard.json": document}}
    answer, _ = post(client, "/validate", dumps(make_review(configmap)))
    assert answer.get_json()["response"]["allowed"] is True


def test_the_bounds_are_settings(client):
    engine = client.application.extensions["aiadmit"]["source"].engine
    body = dumps(make_review(gpu_pod(bounds.MAX_CONTAINERS + 100)))
    roomy = create_app(EngineSource(engine, NoFacts()), settings=Settings(max_containers=1_000)).test_client()
    response = roomy.post("/validate", data=body, content_type="application/json").get_json()["response"]
    assert response["status"]["code"] == 403  # evaluated, not refused
    tight = create_app(EngineSource(engine, NoFacts()), settings=Settings(max_nodes=1_000)).test_client()
    response = tight.post("/validate", data=body, content_type="application/json").get_json()["response"]
    assert "over aiadmit's bound of 1,000 per review" in response["status"]["message"]


# ------------------------------------------------------------------------------------------------ the counting
def _nodes(value) -> tuple[int, int]:
    """(values and keys, empty lists and maps) of a decoded value."""
    if isinstance(value, (dict, list)):
        items = list(value.values()) if isinstance(value, dict) else value
        counts = [_nodes(v) for v in items]
        return (1 + len(value) * isinstance(value, dict) + sum(c[0] for c in counts),
                (not items) + sum(c[1] for c in counts))
    return 1, 0


def _random_json(rng: random.Random, depth: int = 0):
    pick = rng.random()
    if depth > 4 or pick < 0.4:
        return rng.choice([0, -1.5, True, None, "", "a,b", 'q"[:', "\\", "\\\"", "é,:[", "\\\\\"", "a\\\\",
                           "\\\\\\\",:", "x" * rng.randint(0, 5)])
    if pick < 0.7:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {rng.choice(["k", "a:b", "[,", 'x"y', "\\"]) + str(i): _random_json(rng, depth + 1)
            for i in range(rng.randint(0, 5))}


@pytest.mark.parametrize("seed", range(40))
def test_the_count_is_the_nodes_decoding_makes_and_counts_no_string(seed):
    """Counted on the bytes, it is exactly the values and keys decoding makes plus one per empty list or map:
    never fewer (or the bound would not bound), and no separator inside a string (or real objects with JSON in
    their strings would be refused)."""
    rng = random.Random(seed)
    value = _random_json(rng)
    for text in (json.dumps(value), json.dumps(value, indent=1), json.dumps(value, ensure_ascii=False)):
        body = text.encode()
        nodes, empty = _nodes(json.loads(body))
        assert bounds.count_nodes(body, limit=0) == nodes + empty  # limit 0: always the exact count
        assert bounds.count_nodes(body, limit=10**9) >= nodes + empty  # the raw count: an upper bound


# ------------------------------------------------------------------------------------------------ the real server
def test_the_server_takes_its_bounds_from_the_command_line(tmp_path):
    from serverproc import start_server

    with start_server(tmp_path, args=["--no-cluster", "--max-containers", "2", "--max-review-nodes", "400"]) as server:
        status, review = server.review("validate", make_review(gpu_pod(3)))
        assert status == 200 and "more than 2 containers" in review["response"]["status"]["message"]
        pod = gpu_pod(1)
        pod["spec"]["x"] = list(range(400))
        status, review = server.review("mutate", make_review(pod))
        assert status == 200 and "over aiadmit's bound of 400 per review" in review["response"]["status"]["message"]
        status, review = server.review("validate", make_review(gpu_pod(2)))
        assert status == 200 and review["response"]["status"]["code"] == 403  # judged by the policies


# ------------------------------------------------------------------------------------------------ memory per review
PER_REVIEW_MIB = 48  # docs/security.md, invariant (f): the arithmetic of a worker's memory uses this bound


def _at_the_bound(kind: str) -> dict:
    pod = gpu_pod(1)
    room = bounds.MAX_NODES - 200  # what the review around it takes
    if kind == "strings":  # the most bytes per node: 6 MB of 28-character strings
        pod["spec"]["x"] = ["s" * 28 for _ in range(room)]
    elif kind == "maps":  # the most objects per byte
        pod["spec"]["x"] = [{} for _ in range(room // 2)]
    elif kind == "keys":  # a map of 100,000 distinct long keys
        pod["spec"]["x"] = {f"k{i:07d}" + "y" * 20: i + 1000 for i in range(room // 2)}
    else:  # the most containers, each with as many variables as fit
        per = (room - 15 * bounds.MAX_CONTAINERS) // bounds.MAX_CONTAINERS // 5  # 5 nodes a variable
        pod = gpu_pod(bounds.MAX_CONTAINERS)
        for container in pod["spec"]["containers"]:
            container["env"] = [{"name": f"E{j}", "value": "1"} for j in range(per)]
    return pod


@pytest.mark.parametrize("kind, path", [("strings", "/mutate"), ("maps", "/mutate"), ("keys", "/mutate"),
                                        ("containers", "/validate"), ("containers", "/mutate")])
def test_a_review_at_the_bounds_stays_under_the_per_review_memory_bound(client, kind, path):
    """What one review may allocate, at the worst shapes the bounds let through (measured 8-28 MiB; /mutate
    allocates more than /validate: its working copy and the patch check's)."""
    body = dumps(make_review(_at_the_bound(kind)))
    assert bounds.MAX_NODES * 0.8 < bounds.count_nodes(body, limit=0) <= bounds.MAX_NODES
    tracemalloc.start()
    try:
        answer = client.post(path, data=body, content_type="application/json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    response = answer.get_json()["response"]
    assert (response.get("status") or {}).get("code") != 413  # evaluated, not refused
    assert peak < PER_REVIEW_MIB * 2**20, f"{kind} {path}: {peak / 2**20:.1f} MiB"
