"""CEL's `matches` and Kubernetes' regex library (`find`, `findAll`), on RE2 as Kubernetes has them.

Why RE2 (google-re2) and not Python's `re`: RE2 runs in time linear in the text, so no pattern an author (or an
attacker's annotation) writes can stall a review (`(a+)+$` took 23.7 s under `re`), and its syntax is
Kubernetes' (`\\z` accepted, look-behind and back-references rejected, `\\w` ASCII).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

from webhook.cel.runtime import EvalError, overload


@lru_cache(maxsize=1024)
def regex(pattern: str) -> Any:
    """The RE2 program of a pattern (cached: rules repeat a few); EvalError for what RE2 rejects."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise EvalError(f"invalid regular expression {pattern!r} (RE2): {reason}") from None


_MATCHED: dict[tuple[str, str], bool] = {}  # (pattern, text) -> answer: google-re2's Python wrapper costs ~20 µs
# a call, and reviews ask the same few questions (this image against the digest pattern) again and again


def matches(text: Any, pattern: Any) -> bool:
    if type(text) is not str or type(pattern) is not str:
        raise overload("matches", text, pattern)
    key = (pattern, text)
    found = _MATCHED.get(key)
    if found is None:
        found = regex(pattern).search(text) is not None
        if len(text) <= 1024:
            if len(_MATCHED) >= 8192:
                _MATCHED.clear()
            _MATCHED[key] = found
    return found


def find(text: Any, pattern: Any) -> str:
    if type(text) is not str or type(pattern) is not str:
        raise overload("find", text, pattern)
    found = regex(pattern).search(text)
    return "" if found is None else found.group(0)


def find_all(text: Any, pattern: Any, limit: Any = -1) -> list:
    if type(text) is not str or type(pattern) is not str or type(limit) is not int:
        raise overload("findAll", text, pattern, limit)
    out, end = [], -1
    for found in regex(pattern).finditer(text):
        if 0 <= limit <= len(out):
            break
        if found.start() == found.end() == end:  # Go: an empty match abutting the previous match is not one
            continue
        out.append(found.group(0))
        end = found.end()
    return out
