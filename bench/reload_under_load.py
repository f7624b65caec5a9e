"""Policy reload under load: a policy file broken, then fixed, while reviews keep coming; what was lost.

    python3 bench/reload_under_load.py [--rate 60] [--seconds 20] [--port 18743]

Starts `aiadmit serve --dev --policies DIR --reload-interval 0.3` (loopback, 2 workers, no cluster) on a copy of the
built-in bundle, drives it with bench/load.py at `--rate` reviews/s for `--seconds`, breaks one policy file (a YAML
syntax error) at a quarter of the run and restores it at a half, then reads the reload counters from /metrics.
Expected: 0 failed reviews (the old policy set keeps serving while the broken one is refused), reload failures
counted, and the fixed file taken. Bounded in time, loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import ssl
import sys
import tempfile
import threading
import time
import urllib.request

from served import ROOT, load, serve, stop

BUNDLE = os.path.join(ROOT, "policies")


def metrics(port: int) -> str:
    context = ssl.create_default_context(cafile=os.path.join(ROOT, "certs", "dev", "ca.crt"))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=context, timeout=5) as answer:
        return answer.read().decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=60.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--port", type=int, default=18743)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="aiadmit-reload-")
    policies = os.path.join(scratch, "policies")
    os.makedirs(policies)
    for name in os.listdir(BUNDLE):
        if name.endswith(".yaml"):
            shutil.copy(os.path.join(BUNDLE, name), policies)
    target = os.path.join(policies, "shm-sized.yaml")
    good = open(target, encoding="utf-8").read()
    server = serve(args.port, ["--policies", policies, "--reload-interval", "0.3"])
    events = []
    try:

        def edits() -> None:
            time.sleep(args.seconds / 4)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(good.replace("rules:", "rules: [oops", 1))
            events.append({"at_s": round(args.seconds / 4, 1), "policy": "broken"})
            time.sleep(args.seconds / 4)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(good)
            events.append({"at_s": round(args.seconds / 2, 1), "policy": "restored"})

        editor = threading.Thread(target=edits, daemon=True)
        editor.start()
        result = load(args.port, "rate", args.seconds, args.rate)
        editor.join(5)
        text = metrics(args.port)
    finally:
        stop(server)
        shutil.rmtree(scratch, ignore_errors=True)
    reloads = {outcome: float(value) for outcome, value in  # summed over the workers (multiprocess metrics)
               re.findall(r'aiadmit_policy_reloads_total\{outcome="(\w+)"\} ([0-9.]+)', text)}
    summary = {"events": events, "ok": result.get("ok"), "errors": result.get("errors"),
               "first_errors": result.get("first_errors"), "p99_ms": result.get("p99_ms"),
               "policy reloads, all workers": reloads}
    print(json.dumps(summary, indent=1))
    return 0 if result.get("errors") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
