"""aiadmit's webhook against the bare handler of its stack (bench/bare_handler.py), interleaved in one run.

    python3 bench/ceiling.py [--rounds 3] [--duration 10] [--rate 200] [--serve-arg ARG ...]

Issue 25's targets: saturated throughput at least 0.6 of the bare handler's, and the p99 at `--rate` reviews/s
within 1.5 of the bare handler's, on the denied sample (examples/pytorchjob-gpu.json) and on a compliant one
(examples/pytorchjob-gpu-compliant.json). aiadmit runs as `aiadmit serve --dev --no-cluster` of this tree (its
default serving stack, 2 workers); the bare handler under gunicorn gthread, 2 workers x 4 threads, with the same dev
certificates; both on loopback, driven by bench/load.py (8 keep-alive connections, 2 client processes, 2 s warm-up
discarded) on the same two cores; at the rate, the servers' own CPU (master and workers, from /proc) per review
served (the warm-up's reviews counted as the rate times 2 s). Every round runs each (server, review) pair once saturated and once at the rate,
in an order that alternates between rounds. Prints the median of each figure, the ratios, and the load average.
`--serve-arg` passes an option to aiadmit's server (to measure, e.g., `--workers 4`); `--bare-workers` gives the bare
handler as many, so that the comparison stays one of the same stack.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from served import ROOT, load, serve, stop, wait_listening

HERE = os.path.dirname(os.path.abspath(__file__))
REVIEWS = {"denied": os.path.join(ROOT, "examples", "pytorchjob-gpu.json"),
           "compliant": os.path.join(ROOT, "examples", "pytorchjob-gpu-compliant.json")}


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by process `pid` and its children (a gunicorn master and workers)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for child in [pid] + _children(pid):
        try:
            with open(f"/proc/{child}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, IndexError, ValueError):
            pass
    return total


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def serve_bare(port: int, certs: str, workers: int = 2) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "--worker-class", "gthread", "--workers", str(workers),
                               "--threads", "4", "--certfile", os.path.join(certs, "tls.crt"),
                               "--keyfile", os.path.join(certs, "tls.key"), "--bind", f"127.0.0.1:{port}",
                               "--chdir", HERE, "--log-level", "warning", "bare_handler:app"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(server, port, "the bare handler")
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--serve-arg", action="append", default=[])
    parser.add_argument("--bare-workers", type=int, default=2,
                        help="the bare handler's worker processes: the same as aiadmit's when --serve-arg changes them")
    args = parser.parse_args()
    load_before = os.getloadavg()
    servers = {"aiadmit": (serve(18460, args.serve_arg), 18460)}
    try:
        servers["bare"] = (serve_bare(18461, os.path.join(ROOT, "certs", "dev"), args.bare_workers), 18461)
        samples: dict[tuple[str, str, str], list[float]] = {}
        pairs = [(server, review) for server in servers for review in REVIEWS]
        for round_number in range(args.rounds):
            for server, review in (pairs if round_number % 2 == 0 else pairs[::-1]):
                process, port = servers[server]
                for mode in ("saturate", "rate"):
                    before = tree_cpu(process.pid)
                    out = load(port, mode, args.duration, args.rate, server_pid=process.pid, warmup=2,
                               review=REVIEWS[review])
                    served = (out.get("ok") or 0) + (args.rate * 2 if mode == "rate" else 0)  # + the warm-up's
                    if mode == "rate" and served:
                        samples.setdefault((server, review, f"server CPU µs per review at {args.rate:.0f}/s"),
                                           []).append((tree_cpu(process.pid) - before) / served * 1e6)
                    if mode == "saturate":
                        samples.setdefault((server, review, "reviews/s"), []).append(out.get("reviews_per_s") or 0)
                        samples.setdefault((server, review, "saturated p99 ms"), []).append(out.get("p99_ms") or 0)
                    else:
                        for key in ("p50_ms", "p99_ms"):
                            samples.setdefault((server, review, f"{key[:-3]} ms at {args.rate:.0f}/s"), []).append(
                                out.get(key) or 0)
                        rss = max((out.get("worker_rss_mib") or {}).values(), default=0)
                        samples.setdefault((server, review, "worker RSS MiB"), []).append(rss)
                    samples.setdefault((server, review, "errors"), []).append(out.get("errors") or 0)
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} rounds x {args.duration:.0f} s, "
              f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after; medians"
              f"{'; aiadmit serve ' + ' '.join(args.serve_arg) if args.serve_arg else ''}"
              f"{f'; bare handler {args.bare_workers} workers' if args.bare_workers != 2 else ''}")
        print("| review | figure | aiadmit | bare handler | aiadmit / bare |")
        print("|---|---|---:|---:|---:|")
        for review in REVIEWS:
            for figure in dict.fromkeys(f for s, r, f in samples if r == review):
                mine = statistics.median(samples[("aiadmit", review, figure)])
                bare = statistics.median(samples[("bare", review, figure)])
                ratio = f"{mine / bare:.2f}" if bare else "-"
                print(f"| {review} | {figure} | {mine:,.2f} | {bare:,.2f} | {ratio} |")
    finally:
        for process, _ in servers.values():
            stop(process)


if __name__ == "__main__":
    main()
