"""A review route's JSON answer as a plain WSGI application: the status line, two headers, one encoded body.

Why not Flask's Response: building one and calling it runs its headers object, charset and content-length logic,
`get_wsgi_headers` and a ClosingIterator on every review, for an answer that is always the same shape (measured
with the review path that skips Flask: bench/RESULTS.md, 2026-12-07, h-serve). What the client gets is the same
bytes: the status line werkzeug would write, `Content-Type: application/json` and `Content-Length`.

The answer is also its own response iterable. The callbacks (`call_on_close`, as werkzeug's) run once, as soon as the
answer is out, so what a review built is released only then: when the server asks for what follows the body (PEP 3333:
a server sends each bytestring before it asks for the next), or when it calls `close`, which every WSGI server does
whatever happened, a client gone mid-answer included.
"""

from __future__ import annotations

import json
from typing import Callable

from werkzeug.http import HTTP_STATUS_CODES


def _status_line(code: int) -> str:
    return f"{code} {HTTP_STATUS_CODES.get(code, 'UNKNOWN').upper()}"  # werkzeug's own spelling of the line


_STATUS = {code: _status_line(code) for code in (200, 400, 413, 415, 503)}


def encode(data: dict) -> bytes:
    """Every JSON body the server writes, Flask's views and the reviews' alike: compact, ASCII (json's escapes)."""
    return json.dumps(data, separators=(",", ":")).encode()


class Answer:
    """`data` encoded once as compact JSON; callable as a WSGI application, and its own iterable."""

    __slots__ = ("status", "body", "_on_close", "__weakref__")

    def __init__(self, data: dict, status: int = 200):
        self.status = status
        self.body = encode(data)
        self._on_close: list[Callable[[], object]] = []

    def call_on_close(self, callback: Callable[[], object]) -> None:
        self._on_close.append(callback)

    def __call__(self, environ: dict, start_response) -> "Answer":
        start_response(_STATUS.get(self.status) or _status_line(self.status),
                       [("Content-Type", "application/json"), ("Content-Length", str(len(self.body)))])
        return self

    def __iter__(self):
        yield self.body
        self.close()  # the body is sent: the answer is out, closed or not (a test client reads without closing)

    def close(self) -> None:
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()
