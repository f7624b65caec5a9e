"""The gunicorn worker of `aiadmit serve`: one gevent event loop per process, every connection bounded in time.

Why: the webhook's failure policy is Fail, so a client that can stop it from
answering stops every pod create. gunicorn's gthread worker did the TLS
handshake and read the headers in one of its few pool threads on a blocking
socket: eight connections sending half a ClientHello held all of them. Here
each connection is a greenlet, so a slow or idle client costs a little memory,
never the loop; and every phase of a connection has its own deadline:

- handshake (`--handshake-timeout`): from accept to a finished TLS handshake
  (each connection's deadline drawn in the last quarter of it: see JITTER_FLOOR);
- headers (`--header-timeout`): from the first byte of a request (or the end
  of the handshake, for the first one) to the end of its headers;
- body (`--body-timeout`): from the end of the headers to the end of the body
  (a total, not per read: a client trickling one byte a second is cut off);
- keep-alive (`--keepalive-timeout`): how long a connection may wait idle
  between two requests; `--keepalive-requests` requests at most on one
  connection, after which the answer says `Connection: close`;
- `--max-connections` open connections per worker; beyond it the worker stops
  accepting (the kernel's backlog queues the rest) until one closes.

The review itself runs in the connection's greenlet: it is CPU-bound Python, so
one process serves one review at a time, as the gthread worker did under the
GIL. Large bodies (over LARGE_BODY = 64 KiB, or of unknown length) are the exception to
first come, first served (issue 21: four clients looping 1.5 MB reviews kept
both workers reading bodies, and legitimate reviews waited seconds for a turn):
one large review at a time per worker (the others wait their turn without
reading), and its body read yields to the loop after every piece, so that the
small reviews of everyone else are served between two pieces. It also bounds
memory: at most one large body is read and decoded at a time in a worker.

Threads are not monkey-patched (`patch_all(thread=False)`): the policy
reloader and the live-context watches stay OS threads, so compiling a new
policy set shares the CPU with reviews instead of freezing the loop.

Error pages that gunicorn writes itself (400 bad request line, 414, 431, ...)
are JSON like the app's (`{"error": ..., "status": ...}`). A request whose body
is not read to its end (413 from the app) is answered, then the rest of the
body is read and discarded for a bounded time before the connection closes,
so the client reads the answer instead of a connection reset.

This module imports gevent and patches the standard library: gunicorn imports
it only in the worker processes of `aiadmit serve`; nothing else may import it.
"""

from __future__ import annotations

import errno
import json
import random
import socket
import ssl
import time

import gevent
from gevent import monkey
from gunicorn import http, util
from gunicorn.workers.base_async import AsyncWorker
from gunicorn.workers.ggevent import GeventWorker

from webhook.app import serving

LINGER_SECONDS = 2.0  # reading the unread rest of a refused body before closing: lets the client read the answer
# A new connection's handshake and first-header deadlines are drawn between this share of the time-out and all of
# it: a thousand connections opened together then time out (and come back) over a second or more, not in one
# burst of work that delays every review behind it (measured: docs/reliability.md).
JITTER_FLOOR = 0.75
OPEN_PATHS = ("/healthz", "/readyz", "/metrics")  # GET, no body: what the kubelet and Prometheus reach without a cert
LARGE_BODY = 64 * 1024  # bytes: a Pod review is a few kilobytes (tens with managedFields); past this: the large turn
LARGE_PIECE = 64 * 1024  # bytes of a large body read between two pauses
LARGE_PAUSE = 0.002  # seconds of a pause: at most 32 MB/s for a large body, and the loop polls in between


def _jittered(seconds: float) -> float:
    return seconds * random.uniform(JITTER_FLOOR, 1.0)


def _json_error(sock, status_int, reason, mesg):
    """gunicorn's own error pages (util.write_error), as JSON with the same fields as the app's errors."""
    body = json.dumps({"error": mesg or reason, "status": status_int}, separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
    util.write_nonblock(sock, head + body)


class _DeadlineBody:
    """A request body whose reads all end by one deadline (the body time-out), however slowly the client sends.

    A gevent.Timeout, not a socket time-out: one read() of gunicorn's body loops over many recv() calls, and a
    client sending a byte just before each per-recv time-out would never trip one.
    """

    def __init__(self, body, deadline: float, large: bool = False):
        self._body, self._deadline, self._large = body, deadline, large
        self._unpaused = 0  # bytes read since the last pause
        self._ended = False

    def _call(self, method, *args):
        # A body read to its end waits for nothing: gunicorn reads it once more (b"") when the next request comes on
        # the connection, maybe long after this deadline, and a time-out there closed a healthy keep-alive
        # connection with the new request unread (the API server saw a reset; tests/test_server_hostile.py).
        if self._ended:
            return method(*args)
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("request body not received within the body time-out")
        with gevent.Timeout(remaining, socket.timeout("request body not received within the body time-out")):
            return method(*args)

    def read(self, size=None):
        data = self._call(self._body.read, size)
        if not data and size != 0:
            self._ended = True
        if self._large:
            self._unpaused += len(data)
            if self._unpaused >= LARGE_PIECE:  # a piece of a large body read: the loop serves the others first
                self._unpaused = 0
                gevent.sleep(LARGE_PAUSE)
        return data

    def readline(self, size=None):
        return self._call(self._body.readline, size)

    def readlines(self, size=None):
        return self._call(self._body.readlines, size)

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line


def _is_large(req) -> bool:
    """Whether a request's body is over LARGE_BODY, or of a length not known before it is read (chunked)."""
    for name, value in req.headers:
        if name == "TRANSFER-ENCODING":
            return True
        if name == "CONTENT-LENGTH":
            try:
                return int(value) > LARGE_BODY
            except ValueError:
                return True
    return False


class _Closed(Exception):
    """The connection ends here; `reason` says why (a label of aiadmit_connections_closed_total)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class AdmissionWorker(GeventWorker):
    """gunicorn's gevent worker with TLS done per connection (certificate reload) and every phase bounded."""

    def patch(self):
        monkey.patch_all(thread=False)  # sockets, ssl, select, time; OS threads stay threads (see the docstring)
        self.sockets = [gevent.socket.socket(s.FAMILY, socket.SOCK_STREAM, fileno=s.sock.detach())
                        for s in self.sockets]

    def init_process(self):
        self.limits = serving.worker_options()
        self.large_turn = None  # made in the worker's own loop (run), after the fork
        util.write_error = _json_error  # in this worker process only
        super().init_process()

    # ------------------------------------------------------------------ connection
    def handle(self, listener, client, addr):
        reason = "done"
        tls = None
        try:
            client.setblocking(True)
            if client.family in (socket.AF_INET, socket.AF_INET6):  # headers and body are two writes: no Nagle wait
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self._handshake(client)
            self._serve(listener, tls, addr)
        except _Closed as closed:
            reason = closed.reason
        except ssl.SSLError as exc:
            reason = "tls-error"
            self.log.debug("TLS error: %s", exc)
        except http.errors.NoMoreData:
            reason = "client-gone"
        except OSError as exc:
            reason = "client-gone"
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, None):
                self.log.debug("socket error: %s", exc)
        except Exception:  # a bug of ours: this connection ends, the worker goes on
            reason = "error"
            self.log.exception("connection failed")
        finally:
            self.log.debug("connection closed: %s", reason)
            serving.count_closed(reason)
            util.close(tls or client)

    def _handshake(self, client):
        context = serving.worker_tls().context()
        tls = context.wrap_socket(client, server_side=True, do_handshake_on_connect=False)
        with gevent.Timeout(_jittered(self.limits.handshake_timeout), False):
            tls.do_handshake()
            return tls
        tls.close()
        raise _Closed("handshake-timeout")

    def _wait_request(self, tls, parser, first: bool) -> None:
        """Return when the next request's first byte is there; raise _Closed when the client stays idle too long."""
        if parser.unreader.buf.getvalue() or tls.pending():
            return
        limit = _jittered(self.limits.header_timeout) if first else self.limits.keepalive_timeout
        deadline = time.monotonic() + limit
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Closed("header-timeout" if first else "keepalive-timeout")
            if not self.alive and not first:
                raise _Closed("shutdown")
            try:  # in steps of 1 s at most: a stopping worker lets idle connections go at once
                gevent.socket.wait_read(tls.fileno(), timeout=min(remaining, 1.0))
                return
            except socket.timeout:
                continue

    def _serve(self, listener, tls, addr) -> None:
        parser = http.get_parser(self.cfg, tls, addr)
        listener_name = listener.getsockname()
        served, first = 0, True
        while True:
            self._wait_request(tls, parser, first)
            req = None
            try:
                with gevent.Timeout(self.limits.header_timeout, False):
                    req = next(parser)
            except StopIteration:
                raise _Closed("done") from None
            except (http.errors.NoMoreData, ssl.SSLError, OSError):
                raise
            except Exception as exc:  # a malformed request: gunicorn's (JSON) error page, then close
                self.handle_error(req, tls, addr, exc)
                raise _Closed("bad-request") from None
            if req is None:
                raise _Closed("header-timeout")
            first = False
            if self.limits.client_ca_file and req.path not in OPEN_PATHS and not tls.getpeercert():
                # Reviews only from the API server (its admission kubeconfig's client certificate): anyone else is
                # answered before a byte of the body is read, and the connection closes. Everything but the exact
                # paths of the probes and metrics needs one (a percent-encoded /validate is /validate to Flask).
                _json_error(tls, 403, "Forbidden", "a client certificate is required for reviews")
                raise _Closed("no-client-cert")
            served += 1
            if served >= self.limits.keepalive_requests:
                req.must_close = True  # answered with "Connection: close"; the client opens a new one
            large = _is_large(req)
            turn = self._large_turn() if large else None
            if turn is not None:
                turn.acquire()  # one large review at a time in this worker; the body is read when its turn comes
            try:
                deadline = time.monotonic() + self.limits.body_timeout
                req.body = _DeadlineBody(req.body, deadline, large)
                try:
                    # AsyncWorker's: it says whether the connection stays open (GeventWorker's drops the answer)
                    keep = AsyncWorker.handle_request(self, listener_name, req, tls, addr)
                except StopIteration:
                    keep = False
            finally:
                if turn is not None:
                    turn.release()
            if not keep or req.should_close():
                self._linger(parser, tls)
                raise _Closed("done")
            if not parser.finish_body(deadline=time.monotonic() + LINGER_SECONDS, max_bytes=self._drain_cap()):
                self._linger(parser, tls)
                raise _Closed("body-unread")

    def _large_turn(self):
        if self.large_turn is None:
            from gevent.lock import BoundedSemaphore

            self.large_turn = BoundedSemaphore(1)
        return self.large_turn

    def _drain_cap(self) -> int:
        return 2 * serving.current_max_body()

    def _linger(self, parser, tls) -> None:
        """Read and drop the unread rest of the last body (bounded): closing with it unread would reset the
        connection, and the client would lose the answer we just sent."""
        try:
            parser.finish_body(deadline=time.monotonic() + LINGER_SECONDS, max_bytes=self._drain_cap())
        except Exception:
            pass
