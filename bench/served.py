"""A webhook served for a benchmark, and load.py driven at it: what bench/soak.py, worker_faults.py,
reload_under_load.py and webhook_revisions.py share. Loopback only; every wait bounded."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REVIEW = os.path.join(ROOT, "examples", "pytorchjob-gpu.json")


def serve(port: int, args: list[str] = (), tree: str = ROOT, seconds: float = 60) -> subprocess.Popen:
    """`aiadmit serve --dev --no-cluster` of `tree` on 127.0.0.1:`port`, once it accepts connections."""
    server = subprocess.Popen([sys.executable, "-m", "webhook", "serve", "--dev", "--port", str(port), "--no-cluster",
                               *args], cwd=tree, env=dict(os.environ, PYTHONPATH=tree),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(server, port, f"the server of {tree}", seconds)
    return server


def wait_listening(server: subprocess.Popen, port: int, name: str, seconds: float = 60) -> None:
    """Return once `server` accepts connections on 127.0.0.1:`port` (and its workers had a second to start)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(1.0)  # every worker up
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                stop(server)
                raise SystemExit(f"{name} did not listen on {port} within {seconds:.0f} s")
            time.sleep(0.3)


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(20)
    except subprocess.TimeoutExpired:
        server.kill()


def load(port: int, mode: str, seconds: float, rate: float = 200.0, tree: str = ROOT, server_pid: int = 0,
         warmup: float = 0.0, review: str = REVIEW) -> dict:
    """bench/load.py's JSON summary (it exits 1 when a review failed, and prints the summary all the same)."""
    command = [sys.executable, os.path.join(HERE, "load.py"), "--url", f"https://127.0.0.1:{port}/validate",
               "--cacert", os.path.join(tree, "certs", "dev", "ca.crt"), "--review", review, "--mode", mode,
               "--duration", str(seconds), "--warmup", str(warmup), "--json"]
    if mode == "rate":
        command += ["--rate", str(rate)]
    if server_pid:
        command += ["--server-pid", str(server_pid)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds * 3 + warmup + 60)
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"errors": -1, "stderr": done.stderr[-500:]}
