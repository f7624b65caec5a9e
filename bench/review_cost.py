"""What one admission review costs inside the process, piece by piece: instructions (callgrind) per request.

    python3 bench/review_cost.py [--requests 300] [--only full,bare] [--reviews a.json,b.json] [--tree DIR]
    python3 bench/review_cost.py --collector [--requests 15000]   # the cyclic collector's pauses, with gc.freeze()

Each request goes through the real Flask app (webhook/app/server.py's `create_app`, the built-in bundle, the JSON
log line to /dev/null) by Flask's test client, which reads each answer to its end and closes it as a WSGI server
does (`buffered=True`; an answer neither read nor closed keeps the collector paused): no TLS, no sockets, so what
differs between the variants is aiadmit's own work. Variants: the full review; without the log line; without the
metrics; without pausing the collector; the bare handler (bench/bare_handler.py). A variant's cost is the
instructions of N requests / N, after 50 warm-up requests: only those N are collected (they run inside
`sys.call_tracing`, which callgrind's `--toggle-collect` switches on and off), so one run per figure; on
examples/pytorchjob-gpu.json (denied), examples/pytorchjob-gpu-compliant.json (compliant) and
examples/configmap.json (no policy applies). `--tree DIR` measures the webhook package and examples of another tree
(a `git archive` export of a revision: the same probe for both sides of a comparison); `--only` and `--reviews` pick
variants and samples. `--collector` times every collection (gc.callbacks) over N reviews, plain and after
`gc.collect(); gc.freeze()` of what the process holds once loaded, with the latency percentiles.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def client(variant: str, tree: str = ROOT):
    sys.path.insert(0, tree)
    from webhook.app import metrics, server
    from webhook.engine.core import Engine

    if variant == "bare":
        sys.path.insert(0, HERE)
        import bare_handler

        return bare_handler.app.test_client()
    server.setup_logging()
    logging.getLogger("aiadmit").handlers[0].stream = open(os.devnull, "w")
    if variant == "no log line":
        server._log = lambda *args: None
    if variant == "no metrics":
        metrics.Metrics.observe = lambda *args: None
    if variant == "no collector pause":
        server.Held.pause = lambda self: None  # the collector stays on through the review (server.py's Held)
    return server.create_app(server.EngineSource(Engine.load().prepare())).test_client()


def child(variant: str, review: str, count: int, tree: str = ROOT) -> None:
    """The probe run under callgrind: 50 warm-up requests, then `count` inside sys.call_tracing (collected)."""
    test = client(variant, tree)
    with open(os.path.join(tree, "examples", review), "rb") as handle:
        body = handle.read()
    for _ in range(50):
        test.post("/validate", data=body, content_type="application/json", buffered=True)

    def measured() -> None:
        for _ in range(count):
            test.post("/validate", data=body, content_type="application/json", buffered=True)

    sys.call_tracing(measured, ())


def instructions(variant: str, review: str, count: int, tree: str = ROOT) -> int:
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", "--collect-atstart=no",
                           "--toggle-collect=sys_call_tracing", sys.executable, __file__, "--child", variant, review,
                           str(count), tree], capture_output=True, text=True, timeout=3600)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if not found:
        raise SystemExit(f"callgrind gave no count: {done.stderr[-1000:]}")
    return int(found.group(1))


def collector(count: int) -> None:
    for frozen in (False, True):
        code = f"""
import gc, sys, time
sys.argv = [{__file__!r}]
sys.path.insert(0, {HERE!r})
import review_cost
test = review_cost.client("full")
if {frozen}:
    gc.collect(); gc.freeze()
body = open({os.path.join(ROOT, "examples", "pytorchjob-gpu.json")!r}, "rb").read()
pauses, start = {{0: [], 1: [], 2: []}}, [0.0]
def timed(phase, info):
    if phase == "start": start[0] = time.perf_counter()
    else: pauses[info["generation"]].append((time.perf_counter() - start[0]) * 1000)
gc.callbacks.append(timed)
latencies = []
for _ in range({count}):
    began = time.perf_counter()
    test.post("/validate", data=body, content_type="application/json", buffered=True)
    latencies.append((time.perf_counter() - began) * 1000)
latencies.sort()
n = len(latencies)
print("gc.freeze()" if {frozen} else "plain", "tracked", len(gc.get_objects()), "collections (count, max ms):",
      {{g: (len(p), round(max(p), 2) if p else 0) for g, p in pauses.items()}},
      "p50 %.2f p99 %.2f max %.2f ms" % (latencies[n // 2], latencies[int(n * .99)], latencies[-1]))
"""
        subprocess.run([sys.executable, "-c", code], timeout=3600)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=0)
    parser.add_argument("--collector", action="store_true")
    parser.add_argument("--only", default="full,no log line,no metrics,no collector pause,bare")
    parser.add_argument("--reviews", default="pytorchjob-gpu.json,pytorchjob-gpu-compliant.json,configmap.json")
    parser.add_argument("--tree", default=ROOT, help="the tree whose webhook is measured (default: this one)")
    args = parser.parse_args()
    if args.collector:
        collector(args.requests or 15000)
        return 0
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)")
        return 0
    count = args.requests or 300
    tree = os.path.abspath(args.tree)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; instructions per request, {count} requests; "
          f"{tree}")
    for review in args.reviews.split(","):
        for variant in args.only.split(","):
            cost = instructions(variant, review, count, tree) / count
            print(f"{review:<30} {variant:<20} {cost:>12,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
