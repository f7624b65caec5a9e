"""The webhook of two revisions side by side: saturated reviews/s and p99 at a fixed rate, interleaved.

    python3 bench/webhook_revisions.py BASE [NEW] [--also REV ...] [--rounds 3] [--duration 10] [--rate 200]

BASE and NEW are git revisions (NEW defaults to the work tree). Each is checked
out into a scratch directory and served with `aiadmit serve --dev` (its own dev
certificates, port 18443 + its index, loopback only); every round drives each
server in turn with bench/load.py on examples/pytorchjob-gpu.json, once
saturated (8 keep-alive connections) and once at `--rate` reviews/s, alternating
which goes first. Prints the median of each figure and the ratio NEW / BASE. `--also REV` (repeatable) serves
more revisions in the same rounds (each compared with BASE too), so three trees can share one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile

from served import load, serve, stop

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def checkout(revision: str, into: str) -> str:
    target = os.path.join(into, revision.replace("/", "_"))
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", target, revision], check=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--also", action="append", default=[], help="another revision served in the same rounds")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="aiadmit-webhook-revisions-")
    trees = {"base": checkout(args.base, scratch), "new": checkout(args.new, scratch) if args.new else ROOT}
    for revision in args.also:
        trees[revision] = checkout(revision, scratch)
    servers = {}
    try:
        for index, (side, tree) in enumerate(trees.items()):
            servers[side] = (serve(18443 + index, tree=tree), 18443 + index)
        samples: dict[tuple[str, str], list[float]] = {}
        for round_number in range(args.rounds):
            sides = list(trees)
            order = sides if round_number % 2 == 0 else sides[::-1]
            for side in order:
                server, port = servers[side]
                saturated = load(port, "saturate", args.duration, tree=trees[side], server_pid=server.pid, warmup=2)
                paced = load(port, "rate", args.duration, args.rate, tree=trees[side], server_pid=server.pid,
                             warmup=2)
                for name, value in (("saturated reviews/s", saturated.get("reviews_per_s")),
                                    (f"p99 ms at {args.rate:.0f}/s", paced.get("p99_ms")),
                                    ("errors", (saturated.get("errors") or 0) + (paced.get("errors") or 0)),
                                    ("worker RSS MiB", max((paced.get("worker_rss_mib") or {}).values(),
                                                           default=None))):
                    if value is not None:
                        samples.setdefault((name, side), []).append(float(value))
        print(f"base {args.base}  new {args.new or 'work tree'}  rounds {args.rounds}  (median; ratio new/base)")
        for other in ["new", *args.also]:
            if other != "new":
                print(f"-- {other} against base (ratio {other}/base)")
            for name in dict.fromkeys(name for name, _ in samples):
                base, new = samples.get((name, "base"), []), samples.get((name, other), [])
                if base and new:
                    b, n = statistics.median(base), statistics.median(new)
                    print(f"{name:<24} base {b:>10,.2f}  {'new' if other == 'new' else 'this'} {n:>10,.2f}  "
                          f"ratio {n / b if b else float('nan'):5.3f}")
    finally:
        for server, _ in servers.values():
            stop(server)
        for tree in trees.values():
            if tree != ROOT:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
