"""What earlier checks of the same text found: consulted before a policy or config check is run again.

Loading checks every policy and config document against its JSON Schema (and
every CEL expression with aiadmit's own checker, which needs no memory: it is
fast); this is what makes a broken policy fail to load with file, line and
field. Two stores remember answers that cannot change for the same input, by content:

- the built-in bundle's record (`policies/checked.json`, language/record.py),
  written when the bundle was built and consulted in every entry point;
- a cache passed in by the caller (the command line's disk cache,
  app/diskcache.py; the webhook passes none).

A `Checks` is handed down explicitly (`Engine.load(cache=...)` ->
`load_config`/`load_policies` -> each `Expression`): no layer consults a
process-wide switch. A text that differs by one byte is simply checked.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from types import CodeType
from typing import Any, Optional

from webhook.cel.environment import CelError
from webhook.language import record


def package_identity(name: str) -> str:
    """Which installation of a package a check ran with: its location and when its files were written (a
    reinstall or upgrade changes it), found without importing it."""
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None and spec.origin else "?"
    try:
        return f"{origin}@{os.stat(origin).st_mtime_ns}"
    except OSError:
        return origin


@lru_cache(maxsize=4)
def _identity(name: str) -> str:
    return package_identity(name)


class Checks:
    """The answers of earlier checks: the bundle's record (unless `use_record` is false) and `cache`, if any.

    `cache` is duck-typed: `recall(*key) -> bytes | None`, `remember(*key, data=b"")` and
    `compile(python, filename) -> code` (app/diskcache.DiskCache has them).
    """

    def __init__(self, cache: Any = None, use_record: bool = True, note: bool = False):
        self.cache = cache
        self.use_record = use_record
        self.noted: Optional[dict] = {} if note else None  # key -> answer of every CEL check run (bundlerecord)

    # ------------------------------------------------------------------ CEL checks
    def checked(self, source: str, params: Optional[dict], declarations: Any, limits: Any, check: Any,
                constants: Any = None) -> tuple:
        """What aiadmit's checker finds for `source` (cel/environment.py `checked`): the bundle's record answers
        for an expression it holds under the same key (language/celrecord.py), else `check` runs. `constants`:
        the named variables that are constants of the params, given to `check` and part of the key."""
        from webhook.language import celrecord  # a load's: a bundle kept whole (bundlecache.py) asks no check

        if constants:
            plain = check

            def check(*arguments):  # noqa: F811 - the same check, with the constants
                return plain(*arguments, True, constants)
        if not self.use_record and self.noted is None:
            return check(source, params, declarations, limits)
        key = celrecord.key(source, params, declarations, limits, constants)
        if self.use_record:
            found = record.cel_checked(key)
            if found is not None:
                return celrecord.decode(found)  # raises the recorded CelError for a check that failed
        try:
            answer = check(source, params, declarations, limits)
        except CelError as exc:
            # A failure is kept too: a variable is tried at each level until one binds all it reads, and the
            # shallower tries fail in every load of the bundle as built.
            if self.noted is not None:
                self.noted[key] = celrecord.encode_error(exc)
            raise
        if self.noted is not None:
            self.noted[key] = celrecord.encode(answer)
        return answer

    # ------------------------------------------------------------------ JSON Schema checks
    def schema_passed(self, schema_text: str, text: str, place: str) -> bool:
        """Whether this text passed this schema before: the cache is asked first, because reading the record
        parses all of policies/checked.json (104 KB, ~2 % of a warm one-file audit) for the default config's one
        answer; a pass the record gives is kept in the cache too, under the key of a check that passed."""
        key = self._schema_key(schema_text, text, place) if self.cache is not None else None
        if key is not None and self.cache.recall(*key) is not None:
            return True
        if self.use_record and record.passed(schema_text, text):  # a document of the bundle as built: it passed
            if key is not None:
                self.cache.remember(*key)
            return True
        return False

    def remember_schema(self, schema_text: str, text: str, place: str) -> None:
        if self.cache is not None:
            self.cache.remember(*self._schema_key(schema_text, text, place))

    @staticmethod
    def _schema_key(schema_text: str, text: str, place: str) -> tuple:
        return ("schema", schema_text, _identity("jsonschema"), place, text)

    # ------------------------------------------------------------------ compiled programs
    @property
    def keeps_programs(self) -> bool:
        """Whether generated programs are kept: only with the command line's cache, so that a server (no cache)
        spends nothing on their keys."""
        return self.cache is not None

    def recall_program(self, *key: Any) -> Optional[bytes]:
        """A program the native compiler generated before from `key` (cel/stored.py), or None. Without a cache
        (the webhook) there is none: a server generates every program itself."""
        if self.cache is None:
            return None
        return self.cache.recall_program(*key)

    def remember_program(self, *key: Any, data: bytes) -> None:
        if self.cache is not None:
            self.cache.remember_program(*key, data=data)

    def compile(self, python: str, filename: str) -> CodeType:
        """Python's compile of a generated CEL program, answered by the cache when it holds it."""
        if self.cache is not None:
            return self.cache.compile(python, filename)
        return compile(python, filename, "exec")


NONE = Checks(use_record=False)  # every check runs (the record being rebuilt, tests of the checks themselves)
