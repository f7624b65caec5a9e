"""The webhook of two revisions side by side: saturated reviews/s and p99 at a fixed rate, interleaved.

    python3 bench/webhook_revisions.py BASE [NEW] [--rounds 3] [--duration 10] [--rate 200]

BASE and NEW are git revisions (NEW defaults to the work tree). Each is checked
out into a scratch directory and served with `aiadmit serve --dev` (its own dev
certificates, port 18443 + its index, loopback only); every round drives each
server in turn with bench/load.py on examples/pytorchjob-gpu.json, once
saturated (8 keep-alive connections) and once at `--rate` reviews/s, alternating
which goes first. Prints the median of each figure and the ratio NEW / BASE.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REVIEW = os.path.join(ROOT, "examples", "pytorchjob-gpu.json")


def checkout(revision: str, into: str) -> str:
    target = os.path.join(into, revision.replace("/", "_"))
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", target, revision], check=True)
    return target


def serve(tree: str, port: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=tree)
    server = subprocess.Popen([sys.executable, "-m", "webhook", "serve", "--dev", "--port", str(port), "--no-cluster"],
                              cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(1.0)  # every worker up
            return server
        except OSError:
            time.sleep(0.3)
    server.kill()
    raise SystemExit(f"the server of {tree} did not listen on {port}")


def load(tree: str, port: int, server: subprocess.Popen, mode: str, args) -> dict:
    command = [sys.executable, os.path.join(HERE, "load.py"), "--url", f"https://127.0.0.1:{port}/validate",
               "--cacert", os.path.join(tree, "certs", "dev", "ca.crt"), "--review", REVIEW, "--mode", mode,
               "--duration", str(args.duration), "--json", "--server-pid", str(server.pid)]
    if mode == "rate":
        command += ["--rate", str(args.rate)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=args.duration * 4 + 60)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="aiadmit-webhook-revisions-")
    trees = {"base": checkout(args.base, scratch), "new": checkout(args.new, scratch) if args.new else ROOT}
    servers = {}
    try:
        for index, (side, tree) in enumerate(trees.items()):
            servers[side] = (serve(tree, 18443 + index), 18443 + index)
        samples: dict[tuple[str, str], list[float]] = {}
        for round_number in range(args.rounds):
            order = ("base", "new") if round_number % 2 == 0 else ("new", "base")
            for side in order:
                server, port = servers[side]
                saturated = load(trees[side], port, server, "saturate", args)
                paced = load(trees[side], port, server, "rate", args)
                for name, value in (("saturated reviews/s", saturated.get("reviews_per_s")),
                                    (f"p99 ms at {args.rate:.0f}/s", paced.get("p99_ms")),
                                    ("errors", (saturated.get("errors") or 0) + (paced.get("errors") or 0)),
                                    ("worker RSS MiB", max((paced.get("worker_rss_mib") or {}).values(),
                                                           default=None))):
                    if value is not None:
                        samples.setdefault((name, side), []).append(float(value))
        print(f"base {args.base}  new {args.new or 'work tree'}  rounds {args.rounds}  (median; ratio new/base)")
        for name in dict.fromkeys(name for name, _ in samples):
            base, new = samples.get((name, "base"), []), samples.get((name, "new"), [])
            if base and new:
                b, n = statistics.median(base), statistics.median(new)
                print(f"{name:<24} base {b:>10,.2f}  new {n:>10,.2f}  ratio {n / b if b else float('nan'):5.3f}")
    finally:
        for server, _ in servers.values():
            server.terminate()
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
        for tree in trees.values():
            if tree != ROOT:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
