"""Load generator for the webhook: keep-alive HTTPS, concurrent, fixed-rate or saturation.

    python3 bench/load.py --url https://127.0.0.1:8443/validate --cacert certs/dev/ca.crt \
        --review examples/pytorchjob-gpu.json --mode rate --rate 200 --duration 20
    python3 bench/load.py ... --mode saturate --connections 8 --duration 20

Each connection is one TLS socket kept alive for the whole run, verified
against `--cacert`, speaking minimal HTTP/1.1 (the request bytes are built
once; the client's own cost stays small next to the server's). Connections are
spread over `--processes` processes so the client is not held back by one GIL.

- saturate: every connection sends its next review as soon as the previous
  answer arrived (closed loop): the figure is throughput.
- rate: reviews are scheduled at exactly `--rate` per second overall (open
  loop); latency is measured from the *scheduled* time, so a server that falls
  behind is charged for the queue it builds (no coordinated omission).

Every answer must be HTTP 200 with the review's uid, or it counts as an error.
`--server-pid` adds the resident memory of that process's children (gunicorn
workers) at the end of the run. Prints a summary; `--json` prints it as JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import ssl
import statistics
import sys
import threading
import time
from urllib.parse import urlsplit


def build_request(host: str, path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nAccept: application/json\r\n\r\n").encode() + body


class Connection:
    def __init__(self, host: str, port: int, server_name: str, context: ssl.SSLContext):
        raw = socket.create_connection((host, port), timeout=30)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = context.wrap_socket(raw, server_hostname=server_name)
        self.buffer = b""

    def exchange(self, request: bytes) -> tuple[int, bytes]:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buffer += chunk
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = 0
        self.closing = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            elif name.strip().lower() == b"connection" and value.strip().lower() == b"close":
                self.closing = True  # the server's keep-alive limit: open a new connection, as a client must
        while len(rest) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection mid-body")
            rest += chunk
        body, self.buffer = rest[:length], rest[length:]
        return status, body

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _worker(args, connections: int, share: float, offset: float, start_at: float, out: "mp.Queue"):
    """One process: `connections` threads; in rate mode this process sends `share` of the overall rate."""
    url = urlsplit(args.url)
    context = ssl.create_default_context(cafile=args.cacert)
    body = open(args.review, "rb").read()
    uid = json.loads(body)["request"]["uid"].encode()
    request = build_request(url.netloc, url.path or "/", body)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    end_at = start_at + args.duration

    def run(index: int):
        mine, failures = [], []
        try:
            conn = Connection(url.hostname, url.port or 443, args.server_name or url.hostname, context)
        except Exception as exc:
            with lock:
                errors.append(f"connect: {exc!r}")
            return
        interval = None
        if args.mode == "rate":
            per_connection = share / connections
            interval = 1.0 / per_connection
            next_at = start_at + offset + index * interval / connections
        while True:
            if interval is not None:
                scheduled = next_at
                next_at += interval
                if scheduled >= end_at:
                    break
                delay = scheduled - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            else:
                scheduled = time.perf_counter()
                if scheduled >= end_at:
                    break
            try:
                status, answer = conn.exchange(request)
                done = time.perf_counter()
                if status != 200 or uid not in answer:
                    failures.append(f"status {status}")
                else:
                    mine.append(done - scheduled)
                if conn.closing:
                    conn.close()
                    conn = Connection(url.hostname, url.port or 443, args.server_name or url.hostname, context)
            except Exception as exc:
                failures.append(repr(exc))
                conn.close()
                try:
                    conn = Connection(url.hostname, url.port or 443, args.server_name or url.hostname, context)
                except Exception as again:
                    failures.append(f"reconnect: {again!r}")
                    break
        conn.close()
        with lock:
            latencies.extend(mine)
            errors.extend(failures)

    while time.perf_counter() < start_at - 0.05:
        time.sleep(0.01)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put((latencies, errors))


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, int(round(q / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[index]


def rss_of_children(pid: int) -> dict[int, float]:
    """Resident set (MiB) of each child of `pid` (the gunicorn workers of a master)."""
    children = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children += open(f"/proc/{pid}/task/{task}/children").read().split()
        except OSError:
            pass
    out = {}
    for child in children:
        try:
            for line in open(f"/proc/{child}/status"):
                if line.startswith("VmRSS:"):
                    out[int(child)] = int(line.split()[1]) / 1024
        except OSError:
            pass
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="https://host:port/validate or /mutate")
    parser.add_argument("--cacert", required=True, help="CA that signed the server's certificate")
    parser.add_argument("--server-name", help="name to verify (default: the URL's host)")
    parser.add_argument("--review", required=True, help="AdmissionReview JSON file to send")
    parser.add_argument("--mode", choices=("rate", "saturate"), default="saturate")
    parser.add_argument("--rate", type=float, default=200.0, help="reviews per second overall (rate mode)")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive connections in all")
    parser.add_argument("--processes", type=int, default=2, help="client processes (connections are shared out)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of load")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring (discarded)")
    parser.add_argument("--server-pid", type=int, help="gunicorn master pid: report its workers' RSS")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    processes = max(1, min(args.processes, args.connections))

    def run_phase(duration: float):
        phase = argparse.Namespace(**{**vars(args), "duration": duration})
        queue: mp.Queue = mp.Queue()
        start_at = time.perf_counter() + 0.5
        spread = [args.connections // processes + (1 if i < args.connections % processes else 0)
                  for i in range(processes)]
        workers = [mp.Process(target=_worker, args=(phase, n, args.rate * n / args.connections,
                                                    i / max(args.rate, 1.0), start_at, queue))
                   for i, n in enumerate(spread)]
        for worker in workers:
            worker.start()
        latencies, errors = [], []
        for _ in workers:
            got_latencies, got_errors = queue.get()
            latencies += got_latencies
            errors += got_errors
        for worker in workers:
            worker.join()
        return latencies, errors

    if args.warmup > 0:
        run_phase(args.warmup)
    latencies, errors = run_phase(args.duration)
    latencies.sort()
    summary = {
        "mode": args.mode, "rate": args.rate if args.mode == "rate" else None, "connections": args.connections,
        "duration_s": args.duration, "ok": len(latencies), "errors": len(errors),
        "reviews_per_s": round(len(latencies) / args.duration, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 2), "p95_ms": round(percentile(latencies, 95) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2), "max_ms": round(latencies[-1] * 1000, 2)
        if latencies else None,
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2) if latencies else None,
        "first_errors": errors[:3],
    }
    if args.server_pid:
        summary["worker_rss_mib"] = {str(k): round(v, 1) for k, v in rss_of_children(args.server_pid).items()}
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:>16}: {value}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
