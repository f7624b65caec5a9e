"""Compare serving stacks in one run: throughput, latency, memory and behaviour under hostile clients.

    python3 bench/stacks.py --stack today=/work/main --stack new=. --rounds 2 --out /tmp/stacks.json

Each `--stack NAME=CHECKOUT` is a checkout of aiadmit whose `aiadmit serve` is
started (`python3 -m webhook serve --workers 2 --no-cluster`, PYTHONPATH and
working directory = the checkout, `--serve-arg` added to every one) on a free
loopback port with a fresh CA. Against each, in turn (rounds interleave the
stacks, so that the machine's drift hits all of them alike):

- bench/load.py saturate (8 keep-alive connections) and rate 200/s on the GPU
  PyTorchJob review, with the workers' RSS at the end;
- bench/hostile.py: the legitimate client alone, then under each attack of
  `--attacks` (kind:connections, e.g. half-hello:1000).

Every child process is bounded in time and stopped when its part ends.
Prints one JSON line per measurement and writes all of them to `--out`;
`--report FILE` prints the tables of a file written so (median and range over
rounds), as they appear in bench/RESULTS.md and docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(name: str, checkout: str, certs: str, extra: list[str], log_dir: str):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": checkout}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    log = open(os.path.join(log_dir, f"{name}-{port}.log"), "wb")
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "serve", "--cert-file", f"{certs}/tls.crt",
                             "--key-file", f"{certs}/tls.key", "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "2", "--no-cluster", *extra], cwd=checkout, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    context = ssl.create_default_context(cafile=f"{certs}/ca.crt")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name}: server exited {proc.returncode}")
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context, timeout=2) as r:
                if r.status == 200:
                    return proc, port
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"{name}: not ready in 90 s")


def stop(proc) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def run_json(command: list[str], timeout: float) -> dict:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout}s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": (done.stderr or done.stdout)[-300:]}


def report(path: str) -> str:
    """Markdown tables of a results file: load (median, min-max over rounds) and hostile runs."""
    import statistics

    results = json.load(open(path))
    stacks = list(dict.fromkeys(r["stack"] for r in results))
    lines = []
    load = [r for r in results if r["test"].startswith("load")]
    if load:
        lines += ["| stack | test | rounds | reviews/s median (min–max) | p99 ms median (min–max) | errors "
                  "| worker RSS MiB |", "|---|---|---:|---:|---:|---:|---:|"]
        for test in dict.fromkeys(r["test"] for r in load):
            for stack in stacks:
                runs = [r for r in load if r["stack"] == stack and r["test"] == test and "reviews_per_s" in r]
                if not runs:
                    continue
                rate = [r["reviews_per_s"] for r in runs]
                p99 = [r["p99_ms"] for r in runs]
                rss = [v for r in runs for v in (r.get("worker_rss_mib") or {}).values()]
                lines.append(f"| {stack} | {test} | {len(runs)} | {statistics.median(rate):,.0f} ({min(rate):,.0f}–"
                             f"{max(rate):,.0f}) | {statistics.median(p99):.1f} ({min(p99):.1f}–{max(p99):.1f}) | "
                             f"{sum(r['errors'] for r in runs)} | {min(rss):.0f}–{max(rss):.0f} |")
        for test in dict.fromkeys(r["test"] for r in load):
            if "saturate" in test and len(stacks) == 2:
                pairs = [(a["reviews_per_s"], b["reviews_per_s"])
                         for a in load for b in load if a["test"] == b["test"] == test and a["round"] == b["round"]
                         and a["stack"] == stacks[0] and b["stack"] == stacks[1]]
                ratios = sorted(b / a for a, b in pairs)
                if ratios:
                    lines.append(f"\n{stacks[1]} / {stacks[0]}, saturated, round by round: "
                                 + ", ".join(f"{x:.0%}" for x in ratios)
                                 + f"; median {statistics.median(ratios):.0%}; of the summed rounds "
                                 f"{sum(b for _, b in pairs) / sum(a for a, _ in pairs):.0%}.")
    hostile = [r for r in results if r["test"].startswith("hostile")]
    if hostile:
        lines += ["", "| stack | attack | connections held (start/end) | re-opened | legit ok / failed | "
                      "p50 ms | p99 ms | max ms |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in hostile:
            held = f"{r.get('held_at_start')}/{r.get('held_at_end')}" if r.get("attack") != "handshakes" else \
                f"{r.get('attack_handshakes')} handshakes"
            lines.append(f"| {r['stack']} | {r['attack']} {r['connections']} | {held} | "
                         f"{r.get('reopened_by_attacker')} | {r.get('legit_ok')} / {r.get('legit_failed')} | "
                         f"{r.get('p50_ms')} | {r.get('p99_ms')} | {r.get('max_ms')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["--report"]:
        print(report(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", action="append", required=True, metavar="NAME=CHECKOUT")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra `aiadmit serve` argument")
    parser.add_argument("--review", default=os.path.join(REPO, "examples", "pytorchjob-gpu.json"))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--attacks", default="idle:1000,half-hello:1000,half-headers:1000",
                        help="comma-separated kind:connections for bench/hostile.py ('' for none)")
    parser.add_argument("--attack-duration", type=float, default=15.0)
    parser.add_argument("--skip-load", action="store_true", help="only the hostile-client runs")
    parser.add_argument("--out", help="write every measurement here (JSON list)")
    args = parser.parse_args(argv)
    stacks = [item.split("=", 1) for item in args.stack]
    work = tempfile.mkdtemp(prefix="aiadmit-stacks-")
    certs = os.path.join(work, "certs")
    subprocess.run([sys.executable, "-m", "webhook", "certs", "generate", "--out", certs, "--host", "127.0.0.1",
                    "--host", "localhost"], cwd=REPO, env={**os.environ, "PYTHONPATH": REPO}, check=True,
                   capture_output=True)
    attacks = [a.split(":") for a in args.attacks.split(",") if a]
    results = []

    def record(entry: dict) -> None:
        results.append(entry)
        print(json.dumps(entry), flush=True)

    for round_ in range(1, args.rounds + 1):
        for name, checkout in stacks:
            proc, port = start(name, os.path.abspath(checkout), certs, args.serve_arg, work)
            url = f"https://127.0.0.1:{port}/validate"
            try:
                if not args.skip_load:
                    common = [sys.executable, os.path.join(HERE, "load.py"), "--url", url, "--cacert",
                              f"{certs}/ca.crt", "--review", args.review, "--connections", "8", "--processes", "2",
                              "--duration", str(args.duration), "--server-pid", str(proc.pid), "--json"]
                    for mode in (["--mode", "saturate"], ["--mode", "rate", "--rate", "200"]):
                        summary = run_json(common + mode, args.duration * 2 + 60)
                        record({"stack": name, "round": round_, "test": "load " + " ".join(mode[1::2]), **summary})
                for kind, count in [("none", "0")] + attacks:
                    summary = run_json([sys.executable, os.path.join(HERE, "hostile.py"), "--url", url, "--cacert",
                                        f"{certs}/ca.crt", "--review", args.review, "--attack", kind,
                                        "--connections", count, "--duration", str(args.attack_duration),
                                        "--server-pid", str(proc.pid)],
                                       args.attack_duration + 120)
                    alive = proc.poll() is None
                    record({"stack": name, "round": round_, "test": f"hostile {kind} {count}", "server_alive": alive,
                            **summary})
                    time.sleep(2)  # let the server close what the attack left
            finally:
                stop(proc)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
