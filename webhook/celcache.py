"""Compiled CEL programs kept on disk between runs of the command line, the way Python keeps `.pyc` files.

Why: Python's own `compile()` of the generated source is most of what a
program costs to build (the built-in bundle's ~270 programs are ~0.9 MB of
Python: 0.10 s, against 0.035 s to parse CEL and generate the source). A
one-shot `aiadmit audit` or a pre-commit hook pays that in every process,
each worker of a parallel audit again; reading the marshalled code back costs
about 5 µs a program (bench/RESULTS.md).

The key is a digest of the generated source and the name it is compiled
under, in a directory named after the interpreter's bytecode magic number, so
a changed policy, compiler or Python simply misses. Each entry starts with
the digest of its payload and is ignored when it does not match (a torn or
truncated write). Only the command line uses the cache: the webhook compiles
every program once at start (`Engine.prepare`) and loads no code from a
writable directory. Any failure to read or write turns the cache off for the
process; it never turns into an error for the user.

Location: `$AIADMIT_CACHE_DIR`, else `$XDG_CACHE_HOME/aiadmit`, else
`~/.cache/aiadmit`; `AIADMIT_NO_CACHE=1` turns it off.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
from types import CodeType
from typing import Optional

from .atomicfile import write_atomic

_DIGEST = 32  # sha256


class CodeCache:
    """Code objects by the source they were compiled from, one file each under `directory`."""

    def __init__(self, directory: str):
        self.directory = directory
        self.enabled = True
        self.hits = 0
        self.misses = 0

    def _path(self, python: str, filename: str) -> str:
        key = hashlib.sha256(f"{filename}\0{python}".encode("utf-8", "surrogatepass")).hexdigest()
        return os.path.join(self.directory, key[:2], key[2:])

    def compile(self, python: str, filename: str) -> CodeType:
        """`compile(python, filename, "exec")`, from the cache when it holds it; stored when it did not."""
        path = self._path(python, filename) if self.enabled else None
        if path is not None:
            code = self._read(path)
            if code is not None:
                self.hits += 1
                return code
        code = compile(python, filename, "exec")
        if path is not None:
            self.misses += 1
            self._write(path, code)
        return code

    def _read(self, path: str) -> Optional[CodeType]:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        except OSError:
            self.enabled = False
            return None
        digest, payload = data[:_DIGEST], data[_DIGEST:]
        if len(digest) != _DIGEST or hashlib.sha256(payload).digest() != digest:
            return None  # torn or foreign: compiled again and overwritten
        try:
            code = marshal.loads(payload)
        except (ValueError, EOFError, TypeError):
            return None
        return code if isinstance(code, CodeType) else None

    def _write(self, path: str, code: CodeType) -> None:
        payload = marshal.dumps(code)
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            write_atomic(path, hashlib.sha256(payload).digest() + payload, 0o600, durable=False)
        except OSError:
            self.enabled = False  # read-only home, full disk: run without the cache


def default_directory() -> Optional[str]:
    """Where the command line keeps compiled programs, or None when the cache is turned off."""
    if os.environ.get("AIADMIT_NO_CACHE", "") not in ("", "0"):
        return None
    base = os.environ.get("AIADMIT_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "aiadmit")
    return os.path.join(base, "cel-" + importlib.util.MAGIC_NUMBER.hex())
