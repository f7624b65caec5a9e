"""What the command line keeps on disk between runs, the way Python keeps `.pyc` files.

Five things are worth keeping, each measured (bench/RESULTS.md):

- **Compiled CEL programs.** Python's own `compile()` of the generated source
  is most of what a program costs to build (the built-in bundle's ~270
  programs are ~0.9 MB of Python: 0.10 s, against 0.035 s to parse CEL and
  generate the source). A one-shot `aiadmit audit` or pre-commit hook paid it
  in every process, each worker of a parallel audit again; reading the
  marshalled code back costs about 5 µs a program.
- **Generated CEL programs.** Parsing each expression and generating its
  Python cost 5.5 % of a warm one-file audit's instructions and 4.8 % of the
  corpus x10's (bench/RESULTS.md, 2026-12-07): the generated program (source,
  code and constants, cel/stored.py) is kept too, by a key of everything it
  was generated from and a digest of the CEL package, and read back whole.
- **What a policy's compile was answered.** Spelling the content key of each
  of the bundle's 710 CEL checks to find its answer in the record, and parsing
  named variables for their constants, was 12 % of a warm one-file audit
  (bench/RESULTS.md, 2026-12-07, h-startup): the answers one document's compile
  got, in order, are kept under one key (language/transcript.py).
- **Policy files' documents.** Reading the bundle's YAML was 64.5 M of a warm
  one-file audit's 841 M instructions: a file holding only aiadmit Policy
  documents of plain data is kept as JSON (language/parsed.py).
- **What checks found.** Checking the bundle's policies and the config against
  their JSON Schema costs 0.025 s, and importing `jsonschema` to do it 0.05 s;
  checking every CEL expression with the reference library 0.02 s, and loading
  it 0.01 s: on every run, for files that rarely change. A document whose exact
  text passed the exact schema passes again, and an expression the same checker
  accepted is accepted again with the same variables: that is all that is kept.

Keys are digests of everything the result depends on (the generated source; the
document's text, the schema's, the checker's installation), in a directory named
after the interpreter's bytecode magic number, so a changed policy, compiler,
schema or Python simply misses. A code entry starts with the CRC-32 and the
length of its payload and is ignored when they do not match (a torn write): a
checksum, not a digest, since the entries are the user's own and their readers
check what they read back (cel/stored.py, language/bundlecache.py); SHA-256 over
every entry read was a twentieth of a warm one-file audit's instructions
(bench/RESULTS.md, 2026-12-07, h-warm). Only the command
line uses the cache: the webhook checks and compiles everything once at start
and loads no code from a writable directory. A failure to read or write turns
the cache off for the process; it never becomes an error for the user.

Location: `$AIADMIT_CACHE_DIR`, else `$XDG_CACHE_HOME/aiadmit`, else
`~/.cache/aiadmit`; `AIADMIT_NO_CACHE=1` turns it off.
"""

from __future__ import annotations

import binascii
import hashlib
import importlib.util
import marshal
import os
from types import CodeType
from typing import Optional

from webhook.outputs.atomicfile import write_atomic

HEADER = 12  # an entry's CRC-32 (4 bytes) and its payload's length (8), before the payload


def frame(payload: bytes) -> bytes:
    """`payload` behind its CRC-32 and length: what `unframe` tells a torn or truncated entry by."""
    return binascii.crc32(payload).to_bytes(4, "big") + len(payload).to_bytes(8, "big") + payload


def unframe(data: bytes) -> Optional[bytes]:
    """The payload `frame` wrapped, or None for anything else (torn, truncated, foreign)."""
    payload = data[HEADER:]
    if len(data) < HEADER or int.from_bytes(data[4:HEADER], "big") != len(payload) \
            or binascii.crc32(payload) != int.from_bytes(data[:4], "big"):
        return None
    return payload


class DiskCache:
    """Code objects by the source they were compiled from, and digests of what passed a check; a file each."""

    keeps_programs = True  # the compilers compute a program's key only for a cache that keeps programs

    def __init__(self, directory: str):
        self.directory = directory
        self.enabled = True
        self.hits = 0
        self.misses = 0

    def _path(self, kind: str, *parts: str) -> str:
        digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
        return os.path.join(self.directory, kind, digest[:2], digest[2:])

    # ------------------------------------------------------------------ compiled programs
    def compile(self, python: str, filename: str) -> CodeType:
        """`compile(python, filename, "exec")`, from the cache when it holds it; stored when it did not."""
        path = self._path("code", filename, python) if self.enabled else None
        if path is not None:
            code = self._read_code(path)
            if code is not None:
                self.hits += 1
                return code
        code = compile(python, filename, "exec")
        if path is not None:
            self.misses += 1
            self._write_checked(path, marshal.dumps(code))
        return code

    def _read_code(self, path: str) -> Optional[CodeType]:
        payload = self._read_checked(path)
        if payload is None:
            return None
        try:
            code = marshal.loads(payload)
        except (ValueError, EOFError, TypeError):
            return None
        return code if isinstance(code, CodeType) else None

    def _write_checked(self, path: str, payload: bytes) -> None:
        """`payload` framed (`frame`): what `_read_checked` tells a torn entry by."""
        self._write(path, frame(payload))

    def _read_checked(self, path: str) -> Optional[bytes]:
        data = self._read(path)
        return unframe(data) if data is not None else None  # None: torn or foreign, made again and overwritten

    # ------------------------------------------------------------------ generated programs
    def recall_program(self, *key: str) -> Optional[bytes]:
        """A generated program (cel/stored.py's bytes) kept under `key`, or None."""
        found = self._read_checked(self._path("program", *key)) if self.enabled else None
        self.hits += found is not None  # an entry read whole (cel/stored.py may still find it foreign: a miss)
        return found

    def remember_program(self, *key: str, data: bytes) -> None:
        if self.enabled:
            self._write_checked(self._path("program", *key), data)

    # ------------------------------------------------------------------ what a policy's compile was answered
    def recall_transcript(self, key: str) -> Optional[bytes]:
        """The CEL checks' answers of a policy document's last compile kept under `key` (language/transcript.py),
        or None (also for a torn entry)."""
        return self._read_checked(self._path("transcript", key)) if self.enabled else None

    def remember_transcript(self, key: str, data: bytes) -> None:
        if self.enabled:
            self._write_checked(self._path("transcript", key), data)

    # ------------------------------------------------------------------ policy files' documents
    def recall_documents(self, key: str) -> Optional[bytes]:
        """The documents of a policy file kept under `key` (language/parsed.py), or None (also for a torn entry)."""
        return self._read_checked(self._path("documents", key)) if self.enabled else None

    def remember_documents(self, key: str, data: bytes) -> None:
        if self.enabled:
            self._write_checked(self._path("documents", key), data)

    # ------------------------------------------------------------------ a loaded bundle, whole
    def recall_bundle(self, key: str) -> Optional[bytes]:
        """The pickled result of a bundle's load kept under `key` (language/bundlecache.py), or None (also for a
        torn entry)."""
        return self._read_checked(self._path("bundle", key)) if self.enabled else None

    def remember_bundle(self, key: str, data: bytes) -> None:
        if self.enabled:
            self._write_checked(self._path("bundle", key), data)

    # ------------------------------------------------------------------ what a check found
    def recall(self, *key: str) -> Optional[bytes]:
        """What was remembered under `key` (all the inputs of a check, as text), or None."""
        return self._read(self._path("known", *key)) if self.enabled else None

    def remember(self, *key: str, data: bytes = b"") -> None:
        if self.enabled:
            self._write(self._path("known", *key), data)

    # ------------------------------------------------------------------ files
    def _read(self, path: str) -> Optional[bytes]:
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError:
            self.enabled = False
            return None

    def _write(self, path: str, data: bytes) -> None:
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            write_atomic(path, data, 0o600, durable=False)
        except OSError:
            self.enabled = False  # read-only home, full disk: run without the cache


def default_directory() -> Optional[str]:
    """Where the command line keeps its cache, or None when the cache is turned off."""
    if os.environ.get("AIADMIT_NO_CACHE", "") not in ("", "0"):
        return None
    base = os.environ.get("AIADMIT_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "aiadmit")
    return os.path.join(base, "cpython-" + importlib.util.MAGIC_NUMBER.hex())
