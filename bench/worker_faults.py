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
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REVIEW = os.path.join(ROOT, "examples", "pytorchjob-gpu.json")


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
    env = dict(os.environ, PYTHONPATH=ROOT)
    server = subprocess.Popen([sys.executable, "-m", "webhook", "serve", "--dev", "--port", str(args.port),
                               "--no-cluster", "--workers", "2"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    events = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(workers(server.pid)) < 2:
            time.sleep(0.3)
        socket.create_connection(("127.0.0.1", args.port), timeout=5).close()
        time.sleep(1)
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
        load = subprocess.run([sys.executable, os.path.join(HERE, "load.py"), "--url",
                               f"https://127.0.0.1:{args.port}/validate", "--cacert",
                               os.path.join(ROOT, "certs", "dev", "ca.crt"), "--review", REVIEW, "--mode", "rate",
                               "--rate", str(args.rate), "--duration", str(args.seconds), "--warmup", "0", "--json"],
                              capture_output=True, text=True, timeout=args.seconds * 3 + 60)
        killer.join(5)
        time.sleep(3)  # the arbiter's replacements
        after = workers(server.pid)
        lines = load.stdout.strip().splitlines()  # load.py exits 1 when some review failed; the summary is printed
        result = json.loads(lines[-1]) if lines else {"stderr": load.stderr[-500:]}
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
    summary = {"events": events, "ok": result.get("ok"), "errors": result.get("errors"),
               "first_errors": result.get("first_errors"), "p99_ms": result.get("p99_ms"),
               "workers_before": len(before), "workers_after": len(after),
               "replaced": len(set(after) - set(before))}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
