"""A worker of the webhook killed under load: SIGTERM (graceful) and SIGKILL (abrupt), with the reviews lost to each.

    python3 bench/worker_faults.py [--signals TERM,KILL] [--rate 100] [--seconds 30] [--port 18643]

Starts `aiadmit serve --dev` (loopback, 2 workers, no cluster) from this checkout, drives it with bench/load.py at
`--rate` reviews/s for `--seconds`, and meanwhile sends each of `--signals` in turn to one worker, evenly spaced
(gunicorn's arbiter starts a replacement for each); run one signal at a time to tell their losses apart. Prints the reviews answered, the errors and
their first reasons, and whether both replacements came up. Bounded in time, loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

from served import load, serve, stop


def workers(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--port", type=int, default=18643)
    parser.add_argument("--signals", default="TERM,KILL", help="comma-separated: TERM, KILL")
    args = parser.parse_args()
    server = serve(args.port, ["--workers", "2"])
    events = []
    try:
        before = workers(server.pid)

        chosen = [getattr(signal, f"SIG{name.strip().upper()}") for name in args.signals.split(",") if name.strip()]

        def faults() -> None:
            for number, sig in enumerate(chosen, 1):
                fraction = number / (len(chosen) + 1)
                time.sleep(args.seconds / (len(chosen) + 1))
                alive = workers(server.pid)
                if alive:
                    os.kill(alive[0], sig)
                    events.append({"at_s": round(args.seconds * fraction, 1), "signal": sig.name, "worker": alive[0]})

        killer = threading.Thread(target=faults, daemon=True)
        killer.start()
        result = load(args.port, "rate", args.seconds, args.rate)
        killer.join(5)
        time.sleep(3)  # the arbiter's replacements
        after = workers(server.pid)
    finally:
        stop(server)
    summary = {"events": events, "ok": result.get("ok"), "errors": result.get("errors"),
               "first_errors": result.get("first_errors"), "p99_ms": result.get("p99_ms"),
               "workers_before": len(before), "workers_after": len(after),
               "replaced": len(set(after) - set(before))}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
