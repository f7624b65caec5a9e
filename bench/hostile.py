"""Hostile clients against a running webhook, while a legitimate client keeps sending reviews (loopback only).

    python3 bench/hostile.py --url https://127.0.0.1:18601/validate --cacert /tmp/c/ca.crt \
        --review examples/pytorchjob-gpu.json --attack half-hello --connections 1000 --duration 20

Attacks (`--connections N` of them held open for the whole run; one the server
closes is opened again at once, as a real attacker would):

- idle: TCP connect, then send nothing;
- half-hello: send the first half of a real TLS ClientHello, then nothing;
- half-headers: finish the TLS handshake, send half the request headers, then
  nothing;
- handshakes: N threads doing full TLS handshakes back to back (close, again);
- heavy-reviews: N keep-alive connections looping a 1.5 MB /validate review of 20,000 tiny GPU containers (issue
  21: before the review bounds, four of them held both workers for the whole 4 s budget each);
- huge-lists: N keep-alive connections looping a 5.9 MB /mutate review of two million empty lists (issue 21: a
  worker went from 55 to 473 MiB);
- none: the legitimate client alone (the baseline of the same run).

With `--server-pid` (the arbiter of `aiadmit serve`), the peak resident memory (VmHWM) of each worker is read from
/proc at the end. With `--client-cert`/`--client-key`, every client (attacker and legitimate) presents that pair.

The attack runs in its own process, so that the legitimate client's figures are
the server's and not those of a client sharing one GIL with the attacker.
The legitimate client sends `--rate` reviews per second, each on a NEW verified
TLS connection (the costly case: every review needs the accept loop and a
handshake), scheduled at fixed times; latency counts from the scheduled time
and a review not answered 200 with its uid within `--timeout` is a failure.
Everything is bounded: `--duration` seconds of measurement after the attack
connections are open (at most `--setup` seconds to open them). Refuses any
host but loopback. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import select
import socket
import ssl
import sys
import threading
import time
from typing import Optional
from urllib.parse import urlsplit

LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def client_hello(context: ssl.SSLContext, server_name: str) -> bytes:
    """The bytes of a real ClientHello this client would send (made in memory, sent nowhere)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


class Attack:
    """Holds `count` hostile connections of one kind open until stopped; re-opens those the server closes."""

    def __init__(self, kind: str, count: int, host: str, port: int, context: ssl.SSLContext, server_name: str):
        self.kind, self.count, self.host, self.port = kind, count, host, port
        self.context, self.server_name = context, server_name
        self.hello = client_hello(context, server_name)
        self.socks: list = []
        self.opened = self.reopened = self.failed_opens = self.handshakes = 0
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def _open(self):
        raw = socket.create_connection((self.host, self.port), timeout=5)
        if self.kind in REVIEW_ATTACKS:
            return self.context.wrap_socket(raw, server_hostname=self.server_name)
        if self.kind == "idle":
            return raw
        if self.kind == "half-hello":
            raw.sendall(self.hello[: len(self.hello) // 2])
            return raw
        tls = self.context.wrap_socket(raw, server_hostname=self.server_name)
        tls.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: applicat")
        return tls

    def start(self, setup: float) -> None:
        if self.kind == "none":
            return
        if self.kind in REVIEW_ATTACKS:
            self.request = review_attack_request(self.kind, self.server_name)
            self.answers: dict = {}
            self.answered = 0
            for _ in range(self.count):
                thread = threading.Thread(target=self._review_loop, daemon=True)
                thread.start()
                self.threads.append(thread)
            return
        if self.kind == "handshakes":
            for _ in range(self.count):
                thread = threading.Thread(target=self._handshake_loop, daemon=True)
                thread.start()
                self.threads.append(thread)
            return
        deadline = time.monotonic() + setup
        while len(self.socks) < self.count and time.monotonic() < deadline:
            try:
                self.socks.append(self._open())
                self.opened += 1
            except OSError:
                self.failed_opens += 1
                time.sleep(0.01)
        thread = threading.Thread(target=self._keep_open, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _handshake_loop(self) -> None:
        while not self.stop.is_set():
            try:
                with socket.create_connection((self.host, self.port), timeout=5) as raw:
                    with self.context.wrap_socket(raw, server_hostname=self.server_name):
                        self.handshakes += 1
            except OSError:
                self.failed_opens += 1
                time.sleep(0.01)

    def _review_loop(self) -> None:
        """One keep-alive connection sending the attack's review again as soon as each answer is in."""
        sock = None
        while not self.stop.is_set():
            try:
                if sock is None:
                    sock = self._open()
                    sock.settimeout(30)
                    self.opened += 1
                sock.sendall(self.request)
                status, body = read_answer(sock)
                message = body[body.find(b'"message"'):][:90].decode("utf-8", "replace") if body else ""
                key = f"{status} {message}"
                self.answers[key] = self.answers.get(key, 0) + 1
                self.answered += 1
            except (OSError, ValueError):
                self.failed_opens += 1
                if sock is not None:
                    sock.close()
                sock = None
                time.sleep(0.01)
        if sock is not None:
            sock.close()

    def _keep_open(self) -> None:
        """Every 0.2 s: a connection the server closed (readable with EOF, or an error) is opened again."""
        while not self.stop.wait(0.2):
            try:
                readable, _, _ = select.select(self.socks, [], [], 0) if len(self.socks) < 1000 else \
                    (self._poll_readable(), None, None)
            except (OSError, ValueError):
                readable = list(self.socks)
            for sock in readable:
                if self.stop.is_set():
                    return
                try:
                    sock.setblocking(False)
                    data = sock.recv(4096)
                    sock.setblocking(True)
                    if data:
                        continue  # an answer (an error page): the server will close it; look again later
                except (BlockingIOError, ssl.SSLWantReadError):
                    sock.setblocking(True)
                    continue
                except OSError:
                    pass
                self._replace(sock)

    def _poll_readable(self) -> list:
        poller = select.poll()
        by_fd = {}
        for sock in self.socks:
            try:
                by_fd[sock.fileno()] = sock
                poller.register(sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
            except (OSError, ValueError):
                pass
        return [by_fd[fd] for fd, _ in poller.poll(0) if fd in by_fd]

    def _replace(self, sock) -> None:
        try:
            sock.close()
        except OSError:
            pass
        index = self.socks.index(sock)
        try:
            self.socks[index] = self._open()
            self.reopened += 1
        except OSError:
            self.failed_opens += 1
            self.socks.pop(index)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)
        for sock in self.socks:
            try:
                sock.close()
            except OSError:
                pass


REVIEW_ATTACKS = ("heavy-reviews", "huge-lists")


def review_attack_request(kind: str, host: str) -> bytes:
    """The HTTP request of a review attack (keep-alive), its body as the issue describes it."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "tenant"}, "spec": {}}
    if kind == "heavy-reviews":
        path = "/validate"
        pod["spec"]["containers"] = [{"name": f"c{i}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                                     for i in range(20_000)]
    else:
        path = "/mutate"
        pod["spec"]["containers"] = [{"name": "c", "image": "x"}]
        pod["spec"]["x"] = [[] for _ in range(2_000_000)]
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "00000000-0000-4000-8000-000000000001", "operation": "CREATE", "namespace": "tenant",
                          "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "userInfo": {"username": "tenant"}, "object": pod}}
    body = json.dumps(review, separators=(",", ":")).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def read_answer(sock) -> tuple[int, bytes]:
    """(status, body) of one HTTP/1.1 answer with a Content-Length, read from a keep-alive connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("connection closed")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("connection closed")
        body += chunk
    return int(head.split(b" ", 2)[1]), body


def worker_peaks(arbiter: int) -> dict:
    """The peak resident memory (MiB) of `arbiter` and of each of its children (gunicorn's workers), from /proc."""
    peaks = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
        except OSError:
            continue
        if (int(name) == arbiter or int(fields.get("PPid", "0").strip()) == arbiter) and "VmHWM" in fields:
            peaks["arbiter" if int(name) == arbiter else name] = round(int(fields["VmHWM"].split()[0]) / 1024, 1)
    return peaks


def legitimate(host: str, port: int, context: ssl.SSLContext, server_name: str, request: bytes, uid: bytes,
               rate: float, duration: float, timeout: float) -> tuple[list[float], list[str]]:
    """`rate` reviews/s for `duration` s, each on its own new connection, each in its own thread."""
    latencies, failures, lock = [], [], threading.Lock()

    def one(scheduled: float) -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout) as raw:
                raw.settimeout(max(0.01, scheduled + timeout - time.perf_counter()))
                with context.wrap_socket(raw, server_hostname=server_name) as tls:
                    tls.sendall(request)
                    data = b""
                    while True:  # "Connection: close": the answer ends when the server closes
                        chunk = tls.recv(65536)
                        if not chunk:
                            break
                        data += chunk
            status_line = data.split(b"\r\n", 1)[0]
            done = time.perf_counter()
            with lock:
                if b" 200 " in status_line and uid in data:
                    latencies.append(done - scheduled)
                else:
                    failures.append(f"answer {status_line[:60]!r}")
        except Exception as exc:
            with lock:
                failures.append(repr(exc)[:120])

    threads = []
    start = time.perf_counter() + 0.2
    total = int(rate * duration)
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        thread = threading.Thread(target=one, args=(scheduled,), daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(timeout + 1)
    return latencies, failures


def client_context(cacert: str, cert: Optional[str], key: Optional[str]) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=cacert)
    if cert:
        context.load_cert_chain(cert, key)
    return context


def _attacker(kind, count, host, port, cacert, server_name, setup, commands, report, pair=(None, None)) -> None:
    """The attack's process: open, tell the parent how many are held, keep them open until told to stop."""
    attack = Attack(kind, count, host, port, client_context(cacert, *pair), server_name)
    started = time.monotonic()
    attack.start(setup)
    report.put((len(attack.socks), time.monotonic() - started))
    commands.get()
    still_open = len(attack.socks)
    attack.close()
    counts = {"held_at_end": still_open, "reopened_by_attacker": attack.reopened,
              "attack_open_failures": attack.failed_opens, "attack_handshakes": attack.handshakes}
    if kind in REVIEW_ATTACKS:
        counts = {"attack_reviews_answered": attack.answered, "attack_errors": attack.failed_opens,
                  "attack_answers": dict(sorted(attack.answers.items(), key=lambda kv: -kv[1])[:3])}
    report.put(counts)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="https://127.0.0.1:PORT/validate (loopback only)")
    parser.add_argument("--cacert", required=True)
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--review", required=True)
    parser.add_argument("--attack", choices=("none", "idle", "half-hello", "half-headers", "handshakes",
                                             *REVIEW_ATTACKS), default="half-hello")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rate", type=float, default=20.0, help="legitimate reviews per second")
    parser.add_argument("--duration", type=float, default=15.0, help="seconds of legitimate load under attack")
    parser.add_argument("--timeout", type=float, default=10.0, help="a legitimate review slower than this fails")
    parser.add_argument("--setup", type=float, default=30.0, help="at most this long to open the attack")
    parser.add_argument("--server-pid", type=int, help="the server's arbiter: report its workers' peak memory")
    parser.add_argument("--client-cert", help="a client certificate every connection presents (with --client-key)")
    parser.add_argument("--client-key")
    args = parser.parse_args(argv)
    url = urlsplit(args.url)
    if url.hostname not in LOOPBACK:
        parser.error("loopback only: this script attacks the server it is given")
    context = client_context(args.cacert, args.client_cert, args.client_key)
    body = open(args.review, "rb").read()
    uid = json.loads(body)["request"]["uid"].encode()
    request = (f"POST {url.path or '/validate'} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json"
               f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    to_attacker, from_attacker = mp.Queue(), mp.Queue()
    attacker = mp.Process(target=_attacker, args=(args.attack, args.connections, url.hostname, url.port or 443,
                                                 args.cacert, args.server_name, args.setup, to_attacker,
                                                 from_attacker, (args.client_cert, args.client_key)), daemon=True)
    attacker.start()
    try:
        held, setup_s = from_attacker.get(timeout=args.setup + 30)
        latencies, failures = legitimate(url.hostname, url.port or 443, context, args.server_name, request, uid,
                                         args.rate, args.duration, args.timeout)
        to_attacker.put("stop")
        counts = from_attacker.get(timeout=30)
    finally:
        attacker.join(20)
        if attacker.is_alive():
            attacker.kill()
    summary = {
        "attack": args.attack, "connections": args.connections, "held_at_start": held, "setup_s": round(setup_s, 2),
        **counts,
        "legit_sent": int(args.rate * args.duration), "legit_ok": len(latencies), "legit_failed": len(failures),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1), "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1) if latencies else None, "first_failures": failures[:3],
    }
    if args.server_pid:
        summary["worker_peak_rss_mib"] = worker_peaks(args.server_pid)
    print(json.dumps(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
