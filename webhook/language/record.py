"""The checks of the built-in bundle, done when it was built: `policies/checked.json`.

Every run checks its policies and config before it evaluates anything: each
document against its JSON Schema (and each CEL expression with aiadmit's own
checker, cel/checker.py, fast enough to need no record). For the bundle and
default config that ship with aiadmit the schema checks always give the same
answer, yet a first run paid for them (importing jsonschema included;
bench/RESULTS.md), and so did every webhook start and every CI job without a
disk cache. The answers are therefore recorded next to the bundle, by content:
`passed`, the [schema digest, document text digest] pairs that passed.

A file that differs by one byte (an edited policy) is not in the record and is
checked as always. `python3
manifests/sync.py` rewrites the record with the other generated files (or
`python3 -m webhook.app.bundlerecord`, which runs every check afresh); a test
fails while it is stale. This module only reads the record; language/checks.py
decides when it is consulted.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache

from webhook.language.bundle import RECORD_FILE


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@lru_cache(maxsize=1)
def _record() -> frozenset:
    """The [schema digest, document digest] pairs that passed."""
    try:
        with open(RECORD_FILE, encoding="utf-8") as handle:
            data = json.load(handle)
        return frozenset(tuple(pair) for pair in data["passed"])
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()  # no record, or a broken one: everything is checked


def passed(schema_text: str, text: str) -> bool:
    """Whether this exact document text passed this exact schema when the bundle was built."""
    return (digest(schema_text), digest(text)) in _record()
