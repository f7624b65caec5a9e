"""CPU of one review by shape, through the real Flask app in process, with the review bounds raised (so that the
engine sees every shape) and as shipped: what each bound of webhook/inputs/bounds.py is chosen against.

    python3 bench/review_shapes.py            # every shape, /validate and /mutate, CPU of this thread

Prints one line per shape and endpoint: bytes, JSON nodes, CPU seconds with the bounds raised, and the answer
with the shipped bounds (evaluated or refused, and its CPU).
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "tests")]

from serverproc import make_review  # noqa: E402
from webhook.app.server import EngineSource, Settings, create_app  # noqa: E402
from webhook.engine.core import Engine  # noqa: E402
from webhook.inputs import bounds  # noqa: E402
from webhook.inputs.sources import collector_paused  # noqa: E402
from webhook.model.facts import NoFacts  # noqa: E402


def pod(containers=1, env=0, volumes=0, mounts=0, tolerations=0, extra=None):
    spec = {"containers": [{"name": f"c{i}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}},
                            "env": [{"name": f"E{j}", "value": "1"} for j in range(env)],
                            "volumeMounts": [{"name": f"v{j}", "mountPath": f"/m{j}"} for j in range(mounts)]}
                           for i in range(containers)],
            "volumes": [{"name": f"v{i}", "emptyDir": {}} for i in range(volumes)],
            "tolerations": [{"key": f"k{i}", "operator": "Exists"} for i in range(tolerations)]}
    if extra is not None:
        spec["x"] = extra
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "big", "namespace": "t", "labels": {"aiadmit.dev/tier": "untrusted"}}, "spec": spec}


SHAPES = {
    "500 containers": lambda: pod(500),
    "1,000 containers": lambda: pod(1000),
    "20,000 containers": lambda: pod(20_000),
    "1 container, 60,000 env": lambda: pod(env=60_000),
    "40,000 volumes and mounts": lambda: pod(volumes=40_000, mounts=40_000),
    "60,000 tolerations": lambda: pod(tolerations=60_000),
    "99,000 empty maps": lambda: pod(extra=[{} for _ in range(99_000)]),
    "2,000,000 empty lists": lambda: pod(extra=[[] for _ in range(2_000_000)]),
}


def cpu_of(client, path, body):
    with collector_paused():
        started = time.thread_time()
        answer = client.post(path, data=body, content_type="application/json").get_json()
        return time.thread_time() - started, answer


def main() -> None:
    engine = Engine.load().prepare()
    raised = create_app(EngineSource(engine, NoFacts()), settings=Settings(
        budget_seconds=60, max_body_bytes=1 << 30, max_nodes=10**9, max_containers=10**9)).test_client()
    shipped = create_app(EngineSource(engine, NoFacts()), settings=Settings(budget_seconds=4)).test_client()
    for name, make in SHAPES.items():
        body = json.dumps(make_review(make()), separators=(",", ":")).encode()
        nodes = bounds.count_nodes(body, limit=0)
        for path in ("/validate", "/mutate"):
            cpu, _ = cpu_of(raised, path, body)
            cpu_shipped, answer = cpu_of(shipped, path, body)
            status = (answer.get("response") or {}).get("status") or {}
            verdict = "refused" if status.get("code") == 413 else "evaluated"
            print(f"{name:28} {path:9} {len(body) / 2**20:6.2f} MiB {nodes:>9,} nodes  raised {cpu:6.3f} s  "
                  f"shipped: {verdict} {cpu_shipped:6.3f} s", flush=True)


if __name__ == "__main__":
    main()
