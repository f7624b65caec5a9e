"""What the CEL checker found for one policy document, kept by the command line's disk cache between runs.

Every load checks every CEL expression of every policy (cel/environment.py `checked`: parse, check against the
declarations of its level, estimate the cost). For the built-in bundle that is about 300 expressions, 0.03 s of
CPU: a third of what a one-file `aiadmit audit` (the pre-commit hook's run) cost above the interpreter's own
start (bench/RESULTS.md, bench/startup.py). Its answer for an expression -- the variables it reads, whether it
needs the reference library, its type -- depends only on the policy document, the parameters, the limits and the
code of the checker, so a run that found nothing wrong remembers the answers of the whole document under a key
made of all of them, and the next run with exactly the same inputs replays them in the same order.

What a replay keeps safe:
- the key holds the document as loaded (`repr`: every field and value, in order), the parameters after the
  config's overrides, the limits, and the size and modification time of every file of the packages the check
  reads (cel, language, model, k8s): an edited policy, another config or another aiadmit is checked afresh;
- only a document that compiled without any problem is remembered, so an error is never replayed as a pass:
  a broken policy is checked (and fails) on every run;
- each replayed answer names the source it was found for; an expression that differs from the recorded one
  at its position is checked, and nothing more is replayed or remembered for that document.
The webhook passes no cache (checks everything at start), and `AIADMIT_NO_CACHE=1` turns replay off.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any, Mapping, Optional

from webhook.cel.checker import Struct
from webhook.cel.environment import checked

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CHECKER_PACKAGES = ("cel", "language", "model", "k8s")  # what parsing, checking and costing CEL reads


@lru_cache(maxsize=1)
def code_identity() -> str:
    """The checker's installation: name, size and modification time of every file of the packages it reads."""
    parts = []
    for package in _CHECKER_PACKAGES:
        directory = os.path.join(_PACKAGE, package)
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            return ""  # unknown: nothing is replayed
        for entry in entries:
            if entry.is_file():
                stat = entry.stat()
                parts.append(f"{package}/{entry.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return "\n".join(parts)


def _encode_type(kind: Any) -> Any:
    if isinstance(kind, Struct):
        return {"struct": kind.name, "open": kind.open, "fields": {k: _encode_type(v) for k, v in kind.fields.items()}}
    if isinstance(kind, tuple):
        return {"tuple": [_encode_type(part) for part in kind]}
    if isinstance(kind, str):
        return kind
    raise TypeError(f"checker type {kind!r} has no record")  # then the document is simply not remembered


def _decode_type(data: Any) -> Any:
    if isinstance(data, str):
        return data
    if "tuple" in data:
        return tuple(_decode_type(part) for part in data["tuple"])
    return Struct(data["struct"], {k: _decode_type(v) for k, v in data["fields"].items()}, data["open"])


class PolicyChecks:
    """The `Checks` of one policy document's compile (language/compiler.py), which also answer its CEL checks.

    Duck-typed as the `memo` of cel/environment.py's Expression: `compile(python, filename)` goes to the
    wrapped Checks; `checked(source, params, declarations, limits)` replays or runs the check. `finish()` after a
    compile without problems remembers what was found."""

    def __init__(self, checks: Any, doc: Mapping, params: Mapping, limits: Any):
        self.checks = checks
        self.cache = getattr(checks, "cache", None)
        self.key: Optional[tuple] = None
        self.answers: Optional[list] = None
        self.found: list = []
        self.diverged = False
        identity = code_identity() if self.cache is not None else ""
        if identity:
            self.key = ("cel-checked", identity, repr(doc), repr(params), repr(limits))
            data = self.cache.recall(*self.key)
            if data:
                try:
                    self.answers = json.loads(data)
                except ValueError:
                    self.answers = None

    def compile(self, python: str, filename: str):
        return self.checks.compile(python, filename)

    def checked(self, source: str, params: Optional[dict], declarations: Optional[Mapping[str, Any]],
                limits: Any) -> tuple[frozenset, bool, Any]:
        if self.key is None:
            return checked(source, params, declarations, limits)
        position = len(self.found)
        answer = None
        if self.answers is not None and not self.diverged:
            if position < len(self.answers) and self.answers[position][0] == source:
                _, variables, reference, kind = self.answers[position]
                answer = (frozenset(variables), bool(reference), _decode_type(kind))
            else:
                self.diverged = True  # not the document that was recorded: check everything from here on
        if answer is None:
            answer = checked(source, params, declarations, limits)
        self.found.append((source, answer))
        return answer

    def finish(self) -> None:
        """The document compiled without problems: remember its answers (when they were not all replayed)."""
        replayed = self.answers is not None and len(self.answers) == len(self.found)
        found, self.found, self.answers = self.found, [], None  # the programs keep this object: keep it small
        if self.key is None or self.diverged or replayed:
            return
        try:
            data = json.dumps([[source, sorted(variables), reference, _encode_type(kind)]
                               for source, (variables, reference, kind) in found])
        except TypeError:
            return
        self.cache.remember(*self.key, data=data.encode("utf-8"))
