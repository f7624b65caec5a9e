"""What one review costs the serving worker process, TLS and HTTP included: callgrind instructions per request.

    python3 bench/served_cost.py [--requests 200] [--servers aiadmit,bare] [--reviews a.json,b.json] [--tree DIR]
                                 [--connections 2] [--serve-arg ARG ...]

bench/review_cost.py counts a review from the WSGI call on (werkzeug's test client, no sockets); this counts what
bench/ceiling.py serves: aiadmit's `serve --dev --no-cluster` (its gevent worker, webhook/app/gworker.py) against
the bare handler under gunicorn gthread (bench/bare_handler.py), each with ONE worker process, run under callgrind
(`--trace-children=yes`: the worker is a fork of the master). The client is bench/load.py's keep-alive TLS
connection, `--connections` of them, sending in turn (one request in flight at a time, as a worker serves one
review at a time anyway). After 40 warm-up requests the worker's counters are zeroed (`callgrind_control -z`),
`--requests` requests are sent and the counters dumped (`callgrind_control -d`): instructions / requests. The idle
worker's own cost (timers, gunicorn's heartbeat) over the same wall time is measured right after and subtracted;
it is printed too. Load does not move the counts; `--tree DIR` serves another tree (a `git archive` export).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from load import Connection, build_request  # noqa: E402
from served import ROOT, stop, wait_listening  # noqa: E402

WARMUP = 40


def connect(port: int, context: ssl.SSLContext) -> Connection:
    """bench/load.py's connection with a time-out fit for a server under callgrind (50-100 times slower)."""
    conn = Connection.__new__(Connection)
    raw = socket.create_connection(("127.0.0.1", port), timeout=900)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
    conn.buffer = b""
    return conn


def start(server: str, port: int, tree: str, out: str, serve_args: list[str]) -> subprocess.Popen:
    valgrind = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}/cg.%p",
                "--dump-instr=no", "--dump-line=no"]
    certs = os.path.join(tree, "certs", "dev")
    if not os.path.exists(os.path.join(certs, "tls.crt")):  # what `serve --dev` makes on first use
        subprocess.run([sys.executable, "-c", "from webhook.app.commands import serve; serve._dev_certs()"], cwd=tree,
                       env=dict(os.environ, PYTHONPATH=tree), check=True, capture_output=True, timeout=120)
    if server == "bare":
        command = [sys.executable, "-m", "gunicorn", "--worker-class", "gthread", "--workers", "1", "--threads", "4",
                   "--certfile", os.path.join(certs, "tls.crt"), "--keyfile", os.path.join(certs, "tls.key"),
                   "--bind", f"127.0.0.1:{port}", "--chdir", HERE, "--log-level", "warning", "--timeout", "600",
                   "bare_handler:app"]
        env = dict(os.environ)
    else:
        command = [sys.executable, "-m", "webhook", "serve", "--dev", "--port", str(port), "--no-cluster",
                   "--workers", "1", *serve_args]
        env = dict(os.environ, PYTHONPATH=tree)
    proc = subprocess.Popen(valgrind + command, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(out, "stderr"), "w"))
    wait_listening(proc, port, server, seconds=900)
    return proc


def worker_pid(master: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{master}/task/{master}/children") as handle:
                children = [int(p) for p in handle.read().split()]
        except OSError:
            children = []
        if children:
            return children[0]
        time.sleep(0.5)
    raise SystemExit("no worker process")


def control(flag: str, pid: int) -> None:
    subprocess.run(["callgrind_control", flag, str(pid)], check=True, capture_output=True, timeout=300)


def dumped(out: str, pid: int, seen: set) -> int:
    """The instruction total of the newest dump of `pid` not read yet."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for path in sorted(glob.glob(f"{out}/cg.{pid}.*")):
            if path in seen:
                continue
            with open(path) as handle:
                text = handle.read()
            found = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
            if found:
                seen.add(path)
                return int(found.group(1))
        time.sleep(0.5)
    raise SystemExit(f"no callgrind dump of {pid}")


def measure(server: str, review: str, count: int, tree: str, connections: int, serve_args: list[str]) -> tuple:
    out = tempfile.mkdtemp(prefix="served-cost-")
    port = 18470 if server == "aiadmit" else 18471
    proc = start(server, port, tree, out, serve_args)
    try:
        pid = worker_pid(proc.pid)
        context = ssl.create_default_context(cafile=os.path.join(tree, "certs", "dev", "ca.crt"))
        with open(review, "rb") as handle:
            body = handle.read()
        uid = json.loads(body)["request"]["uid"].encode()
        request = build_request(f"127.0.0.1:{port}", "/validate", body)
        conns = [connect(port, context) for _ in range(connections)]

        def send(n: int) -> None:
            for index in range(n):
                conn = conns[index % connections]
                status, answer = conn.exchange(request)
                if status != 200 or uid not in answer:
                    raise SystemExit(f"{server}: status {status}: {answer[:200]!r}")
                if conn.closing:
                    conn.close()
                    conns[index % connections] = connect(port, context)

        send(WARMUP)
        seen: set = set()
        control("-z", pid)
        began = time.monotonic()
        send(count)
        control("-d", pid)
        busy = dumped(out, pid, seen)
        wall = time.monotonic() - began
        control("-z", pid)
        time.sleep(wall)
        control("-d", pid)
        idle = dumped(out, pid, seen)
        for conn in conns:
            conn.close()
        return (busy - idle) / count, idle / count, wall
    finally:
        stop(proc)
        shutil.rmtree(out, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--servers", default="aiadmit,bare")
    parser.add_argument("--reviews", default="pytorchjob-gpu.json,pytorchjob-gpu-compliant.json")
    parser.add_argument("--tree", default=ROOT)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--serve-arg", action="append", default=[])
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)")
        return 0
    tree = os.path.abspath(args.tree)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; worker instructions per request, "
          f"{args.requests} requests over {args.connections} connections; {tree}")
    for review in args.reviews.split(","):
        for server in args.servers.split(","):
            cost, idle, wall = measure(server, os.path.join(tree, "examples", review), args.requests, tree,
                                       args.connections, args.serve_arg)
            print(f"{review:<30} {server:<8} {cost:>12,.0f}   (idle {idle:,.0f} a request's time, {wall:.0f} s)",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
