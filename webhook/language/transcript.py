"""What the CEL checks of one policy document found, in the order its compile asked: replayed by the next compile.

Why: a warm one-file audit still spelt a content key for every one of the bundle's 710 CEL checks (the source, its
params, every declaration of its level, the limits; language/celrecord.py) to find each answer in the record, and
parsed each named variable that reads a param to find its constants: keeping what is below spares 12 % of its
instructions (bench/RESULTS.md, 2026-12-07, h-startup). For an unchanged document compiled by unchanged code, the
checks asked and their answers are always the same, in the same order. So the command line's disk cache keeps, per
document, the list of (source, answer) pairs its compile got, under one key: a digest of the document, the params
it was compiled with, the cost limits, and the code that decides what is asked and answered (webhook/cel/*.py and
the modules it imports, webhook/language/*.py). The next compile of that document takes each answer in turn
instead of checking.

Fail safe: a transcript that is missing, torn (the cache checks a digest of each entry) or not this shape is a miss;
a replay asked for a source other than the next one held raises `Diverged`, and the document is compiled again,
every check asked, and its transcript rewritten (as is one a replay did not use up). Only a compile without
problems is kept. The webhook
has no cache, so it never replays: it checks every expression it has no record of.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from functools import lru_cache
from typing import Any, Optional

from webhook.cel import stored
from webhook.cel.environment import CelError
from webhook.language import celrecord
from webhook.language.checks import Checks
from webhook.model.valueclass import astuple

_HERE = os.path.dirname(os.path.abspath(__file__))


class Diverged(Exception):
    """A replay was asked for a check its transcript does not hold next: the document is compiled again."""


@lru_cache(maxsize=1)
def _code_identity() -> str:
    """The checker's identity (webhook/cel/*.py and declarations.py), the modules outside webhook/cel/ its code
    imports (cel/stored.py's identity: the quantity and version code a constant's check runs), and every
    webhook/language/*.py, digested."""
    hashed = hashlib.sha256(celrecord.checker_identity().encode() + b"\0" + stored.identity().encode())
    return stored.feed(hashed, _HERE, sorted(glob.glob(os.path.join(_HERE, "*.py")))).hexdigest()


def key(doc: Any, params_override: Any, limits: Any) -> str:
    """The digest a document's transcript is kept under: the code, the document, the params that override its own
    and the limits."""
    limits_spelt = astuple(limits) if limits is not None else None
    spelt = json.dumps([_code_identity(), doc, params_override, limits_spelt], sort_keys=True, default=repr)
    return hashlib.sha256(spelt.encode("utf-8", "surrogatepass")).hexdigest()


class Transcribing(Checks):
    """The `Checks` one document is compiled with: the same record, cache and notes as `checks`, and either the
    answers of a transcript in turn (`replaying`) or each answer noted for the transcript to be kept."""

    def __init__(self, checks: Checks, kept_as: str, entries: Optional[list] = None):
        super().__init__(checks.cache, checks.use_record)
        self.noted = checks.noted
        self.kept_as = kept_as
        self.replaying = entries is not None
        self.entries: list = entries if entries is not None else []
        self.position = 0

    def checked(self, source: str, params: Optional[dict], declarations: Any, limits: Any, check: Any,
                constants: Any = None) -> tuple:
        if not self.replaying:
            try:
                answer = super().checked(source, params, declarations, limits, check, constants)
            except CelError as exc:
                self.entries.append([source, celrecord.encode_error(exc)])
                raise
            self.entries.append([source, celrecord.encode(answer)])
            return answer
        if self.position >= len(self.entries) or self.entries[self.position][0] != source:
            raise Diverged(source)
        found = self.entries[self.position][1]
        self.position += 1
        try:
            return celrecord.decode(found)  # raises the recorded CelError for a check that failed
        except CelError:
            raise
        except (IndexError, KeyError, TypeError, ValueError):
            raise Diverged(source) from None  # not an answer celrecord wrote

    def finished(self) -> None:
        """After a compile without problems: keep what was noted (a replay that used all it held keeps it)."""
        if self.replaying and self.position == len(self.entries):
            return
        if self.replaying:  # fewer checks asked than it holds (the policy compiled is the same): rewritten
            self.entries = self.entries[:self.position]
        try:
            self.cache.remember_transcript(self.kept_as, data=json.dumps(self.entries).encode("utf-8", "surrogatepass"))
        except (OSError, TypeError, ValueError):
            pass  # a transcript that cannot be written is simply not kept


def for_document(checks: Checks, doc: Any, params_override: Any, limits: Any) -> Optional[Transcribing]:
    """The `Checks` to compile `doc` with when `checks` has a cache that keeps transcripts (the command line's),
    replaying the transcript it holds for this document if any; None without such a cache (the webhook)."""
    cache = checks.cache
    if cache is None or not hasattr(cache, "recall_transcript") or checks.noted is not None:
        return None
    try:
        found_key = key(doc, params_override, limits)
        data = cache.recall_transcript(found_key)
    except (OSError, TypeError, ValueError):
        return None
    return Transcribing(checks, found_key, _entries(data) if data is not None else None)


def _entries(data: bytes) -> Optional[list]:
    """The (source, answer) pairs of a kept transcript, or None when it is not one."""
    try:
        entries = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if type(entries) is not list or not all(type(entry) is list and len(entry) == 2 and type(entry[0]) is str
                                            and type(entry[1]) is list for entry in entries):
        return None
    return entries
