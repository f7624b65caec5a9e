"""The time budget against a huge object: one untrusted Pod with N containers, /validate and /mutate through the
real Flask app in process, the server's own duration (its log line) and the wall time of the call.

    python3 bench/hugeobject.py 30000 8      # containers, budget seconds

Issue 12: 30,000 containers were answered after 8.95 s with an 8 s budget. Loopback only (no network at all).
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "tests")]

from serverproc import make_review  # noqa: E402
from webhook.app.server import EngineSource, Settings, create_app, setup_logging  # noqa: E402
from webhook.engine.core import Engine  # noqa: E402
from webhook.model.facts import NoFacts  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "big", "namespace": "t", "labels": {"aiadmit.dev/tier": "untrusted"}},
           "spec": {"containers": [{"name": f"c{i}", "image": "x", "securityContext": {"privileged": True},
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}} for i in range(n)]}}
    engine = Engine.load().prepare()
    setup_logging()  # the review's log line, with duration_ms, goes to stderr
    client = create_app(EngineSource(engine, NoFacts()),
                        settings=Settings(budget_seconds=budget, max_body_bytes=1 << 30, max_nodes=10**8,
                                          max_containers=10**7)).test_client()  # the bounds raised: the budget stops it
    body = json.dumps(make_review(pod))
    for path in ("/validate", "/mutate"):
        started = time.perf_counter()
        answer = client.post(path, data=body, content_type="application/json")
        wall = time.perf_counter() - started  # the answer is out; reading it to its end frees what the review built
        response = answer.get_json()["response"]
        print(f"{path} containers={n} budget={budget}s wall={wall:.3f}s "
              f"allowed={response['allowed']} bytes={len(answer.data)} "
              f"message={response.get('status', {}).get('message', '')[:80]!r}", flush=True)


if __name__ == "__main__":
    main()
