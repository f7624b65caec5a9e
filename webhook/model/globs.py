"""Shell-style globs as `fnmatch.fnmatchcase` reads them, with a glob that has no wildcard compared as text.

Why: fnmatch compiles a regular expression for every distinct pattern it is asked about, in every process, and
most of the config's patterns are plain names (the excluded namespaces, the trusted controllers' namespaces, the
accelerators' resource names): a one-file audit compiled 15 of them, about 3 % of its time (bench/RESULTS.md,
2026-12-07, h-warm). fnmatch has no escape character and translates every character but `*`, `?` and `[` to
itself, so a pattern with none of the three matches exactly the one string equal to it; such a pattern (with a
string to match) is compared, any other is fnmatch's, as before.
"""

from __future__ import annotations

import fnmatch
from typing import Iterable


def matches(name: str, pattern: str) -> bool:
    """`fnmatch.fnmatchcase(name, pattern)`, without a regular expression for a pattern with no wildcard."""
    if type(name) is str and type(pattern) is str and "*" not in pattern and "?" not in pattern \
            and "[" not in pattern:
        return name == pattern
    return fnmatch.fnmatchcase(name, pattern)


def any_matches(name: str, patterns: Iterable[str]) -> bool:
    """`any(fnmatch.fnmatchcase(name, p) for p in patterns)`, each pattern as `matches` reads it."""
    return any(matches(name, pattern) for pattern in patterns)
