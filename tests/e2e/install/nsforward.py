"""A network namespace of the test's own, and a loopback port on the host that leads into it.

Why: the single-node cluster (tests/e2e/install/nodeharness.py) needs addresses that are not loopback (the API
server's advertised address, a pod network on a CNI bridge, Service IPs), and such traffic must never touch the
machine's own interfaces. So every component runs inside a namespace made here, and the test process, which
stays in the host's namespace, reaches the API server through a forwarder: it listens on 127.0.0.1 and dials each
connection from a thread that has entered the namespace (setns(2) moves only the calling thread; a socket keeps
the namespace it was created in).
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading

CLONE_NEWNET = 0x40000000


def create_netns(name: str) -> str:
    """`ip netns add NAME` with its loopback up; returns the path of its handle (/run/netns/NAME)."""
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True, text=True, timeout=10)
    subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True, timeout=10)
    return f"/run/netns/{name}"


def delete_netns(name: str) -> None:
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)


def _enter(path: str) -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


class Forwarder:
    """127.0.0.1:<port> in the host's namespace -> (host, port) inside the namespace at `netns_path`."""

    def __init__(self, netns_path: str, target: tuple[str, int]) -> None:
        self.netns_path, self.target = netns_path, target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.5)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="netns-forwarder", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error:
            raise self._error

    def _serve(self) -> None:
        try:
            _enter(self.netns_path)  # this thread only; the listener was made before, in the host's namespace
        except BaseException as exc:  # reported to the constructor
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                conn.close()
                continue
            conn.settimeout(None)
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._listener.close()
