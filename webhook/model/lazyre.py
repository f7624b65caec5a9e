"""A regular expression compiled at its first use, not when its module is imported.

Why: `re.compile` runs Python's own regex parser and compiler; the module-level patterns of the CEL runtime
(timestamps, conversions, URLs), of the policy compiler's helpers and of the audit's fact scan were compiled by
every process that imported them, a warm one-file audit included, which uses none of them (bench/RESULTS.md,
2026-12-07, h-warm). Each method is the compiled pattern's, so a `Lazy` stands where the pattern stood.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Optional


class Lazy:
    """`re.compile(pattern, flags)`, done on the first call of any method."""

    __slots__ = ("pattern", "flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern, self.flags, self._compiled = pattern, flags, None

    @property
    def compiled(self) -> re.Pattern:
        found = self._compiled
        if found is None:  # two threads may both compile it: the same pattern, either one kept
            found = self._compiled = re.compile(self.pattern, self.flags)
        return found

    def match(self, *arguments: Any) -> Optional[re.Match]:
        return self.compiled.match(*arguments)

    def fullmatch(self, *arguments: Any) -> Optional[re.Match]:
        return self.compiled.fullmatch(*arguments)

    def search(self, *arguments: Any) -> Optional[re.Match]:
        return self.compiled.search(*arguments)

    def finditer(self, *arguments: Any) -> Iterator[re.Match]:
        return self.compiled.finditer(*arguments)

    def findall(self, *arguments: Any) -> list:
        return self.compiled.findall(*arguments)

    def sub(self, *arguments: Any) -> str:
        return self.compiled.sub(*arguments)
