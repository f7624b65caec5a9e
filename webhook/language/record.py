"""The checks of the built-in bundle, done when it was built: `policies/checked.json`.

Every run checks its policies and config before it evaluates anything: each
document against its JSON Schema, each CEL expression with aiadmit's own
checker (cel/checker.py). For the bundle and default config that ship with
aiadmit the checks always give the same answer, yet a first run paid for them
(importing jsonschema included; bench/RESULTS.md), and so did every webhook
start and every CI job without a disk cache. The answers are therefore recorded
next to the bundle, by content: `passed`, the [schema digest, document text
digest] pairs that passed, and `cel`, what the checker found for each
expression, under a key that digests all it depends on (language/celrecord.py).

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
from typing import Optional

from webhook.language.bundle import RECORD_FILE


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _Recorded:
    __slots__ = ("passed", "cel")

    def __init__(self, passed: frozenset = frozenset(), cel: Optional[dict] = None):
        self.passed, self.cel = passed, cel or {}


@lru_cache(maxsize=1)
def _record() -> _Recorded:
    """The [schema digest, document digest] pairs that passed, and the CEL checks' answers by key."""
    try:
        with open(RECORD_FILE, encoding="utf-8") as handle:
            data = json.load(handle)
        cel = data.get("cel", {})
        return _Recorded(frozenset(tuple(pair) for pair in data["passed"]), cel if isinstance(cel, dict) else {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return _Recorded()  # no record, or a broken one: everything is checked


def passed(schema_text: str, text: str) -> bool:
    """Whether this exact document text passed this exact schema when the bundle was built."""
    return (digest(schema_text), digest(text)) in _record().passed


def cel_checked(key: str) -> Optional[list]:
    """What aiadmit's checker found for the expression of this key (language/celrecord.py) when the bundle was
    built, or None."""
    found = _record().cel.get(key)
    return found if isinstance(found, list) and len(found) == (3 if found[:1] == ["error"] else 4) else None
