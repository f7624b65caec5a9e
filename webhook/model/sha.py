"""SHA-256, as every cache key and record digest of aiadmit is spelt, without OpenSSL's start-up.

Why: `hashlib` imports `_hashlib`, and with it OpenSSL's library and its initialisation: about 2 ms of every
process here (10 M instructions, 2 % of a warm one-file audit; bench/RESULTS.md, 2026-12-07, h-warm). CPython's
own SHA-256 module gives the same digests and starts in a tenth of that; what a warm run hashes is about 200 KB
(the policy files' texts in the kept bundle's key, the entries' names: the entries themselves are checked by a
CRC, app/diskcache.py), where OpenSSL's faster hashing (0.2 ms against 0.9 ms for 180 KB here) does not pay for
its start. `hashlib`'s is taken where neither module of CPython's is there (another interpreter): the digests
are the same everywhere.
"""

from __future__ import annotations

try:
    from _sha2 import sha256  # CPython 3.12 and later
except ImportError:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:  # pragma: no cover - an interpreter without CPython's modules
        from hashlib import sha256

__all__ = ["sha256"]
