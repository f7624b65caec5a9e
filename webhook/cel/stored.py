"""A generated program as bytes, for a cache to keep between processes: what lets a run skip parsing and generating.

Why: the command line parsed each CEL expression it ran and generated its Python in every process, ~6 % of a
one-file audit (bench/RESULTS.md, issue 25), for policies that rarely change. What generating gives is the
Python source, its code object and the names the code reads besides the helpers (its constants and free-variable
sets); this writes them with `marshal`, so only plain data goes in: a constant is kept as its value when it is
JSON-like data of exactly the built-in types, or by its name in the tables the generator took it from (the
function library, the built-in functions, the CEL types, the message builder), and a program with any other
constant (a closure made for one expression) is simply not kept. Reading resolves the names in this process's
tables, and anything unexpected (a name not there, a shape not this one's) is a miss, never an error.

The cache's key is the digest of the code that generates (`identity`) and the caller's (cel/compiler.py,
cel/templates.py: all they generate from); the disk cache keeps it under Python's bytecode magic (app/diskcache.py).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
from functools import lru_cache
from types import CodeType
from typing import Any, Callable, Mapping, Optional

from webhook.cel.messages import build
from webhook.cel.runtime import TYPES, Unsupported

_HERE = os.path.dirname(os.path.abspath(__file__))
# Modules outside webhook/cel/ that its code imports: with webhook/cel/*.py, all the code a generated program can
# depend on, so that a changed compiler never runs what an older one generated.
_IMPORTED = ("../k8s/quotascope.py", "../k8s/versions.py", "../model/quantity.py")


def feed(hashed: Any, root: str, paths: Any) -> Any:
    """`hashed` (a hashlib object) fed with each file of `paths` in turn: its path relative to `root`, NUL, its
    bytes, NUL. How every digest of code that a cache entry depends on is spelt (this module's, the checker's in
    language/celrecord.py, the transcripts' and the parsed documents' in language/)."""
    for path in paths:
        with open(path, "rb") as handle:
            hashed.update(os.path.relpath(path, root).encode() + b"\0" + handle.read() + b"\0")
    return hashed


@lru_cache(maxsize=1)
def _package_hash() -> Any:
    import glob  # here: a run whose kept bundle vouches for identity() never lists the package

    return feed(hashlib.sha256(), _HERE, sorted(glob.glob(os.path.join(_HERE, "*.py"))))


def package_hash() -> Any:
    """sha256 fed with each webhook/cel/*.py in sorted order (its name, NUL, its text, NUL): what both this
    module's `identity` and the checker's (language/celrecord.py) start from, read once per process."""
    return _package_hash().copy()


_IDENTITY: list[str] = []  # identity() once known: computed, or vouched for by a kept bundle


def identity() -> str:
    """A digest of the code that generates programs and of the code their constants come from."""
    if not _IDENTITY:
        _IDENTITY.append(feed(package_hash(), _HERE, [os.path.join(_HERE, name) for name in _IMPORTED]).hexdigest())
    return _IDENTITY[0]


def vouch(known: str) -> None:
    """Take `known` as `identity()` for this process, unless it was computed already. Only for a value computed by
    this very code from these very files: a loaded bundle kept whole (language/bundlecache.py) carries it, under a
    key that holds every webhook file's size and modification time, so reading and digesting webhook/cel/*.py again
    (13.5 M instructions of a warm one-file audit, bench/RESULTS.md, h-boot) would give the same digest."""
    if not _IDENTITY:
        _IDENTITY.append(known)


_PLAIN = (str, int, float, bool, type(None), bytes)
_TABLES: dict[int, tuple[Mapping, dict, dict]] = {}  # id(functions) -> (functions, by id, by name)


def _tables(functions: Mapping[str, Callable], builtins: Mapping[str, tuple]) -> tuple[dict, dict]:
    """(id -> name, name -> object) of every object a generated program may hold by name."""
    found = _TABLES.get(id(functions))
    if found is not None and found[0] is functions:
        return found[1], found[2]
    names: dict[str, Any] = {"m:build": build}
    names.update((f"f:{name}", function) for name, function in functions.items())
    names.update((f"b:{name}", entry[1]) for name, entry in builtins.items())
    names.update((f"t:{name}", kind) for name, kind in TYPES.items())
    ids: dict[int, str] = {}
    for name, value in names.items():
        ids.setdefault(id(value), name)
    if len(_TABLES) >= 8:
        _TABLES.clear()
    _TABLES[id(functions)] = (functions, ids, names)
    return ids, names


def _plain(value: Any) -> bool:
    """Whether `value` is data of exactly the built-in types marshal writes and reads back as the same types."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is list or kind is tuple or kind is frozenset:
        return all(_plain(item) for item in value)
    if kind is dict:
        return all(_plain(key) and _plain(item) for key, item in value.items())
    return False


_SPELT: dict[int, tuple[Mapping, str]] = {}  # id(functions) -> (functions, its key)


def functions_key(functions: Mapping[str, Callable]) -> str:
    """What in `functions` a program depends on, as a digest: its names and where each function is defined
    (memoised by identity: the library's table is a module constant, never changed once built)."""
    found = _SPELT.get(id(functions))
    if found is not None and found[0] is functions:
        return found[1]
    spelt = hashlib.sha256("\0".join(
        f"{name}={getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', '?')}"
        for name, function in sorted(functions.items())).encode("utf-8", "surrogatepass")).hexdigest()
    if len(_SPELT) >= 8:
        _SPELT.clear()
    _SPELT[id(functions)] = (functions, spelt)
    return spelt


def inline_key(inline: Optional[Mapping[str, str]]) -> str:
    """The named variables' sources a program inlines, spelt out in their order."""
    return json.dumps(list(inline.items())) if inline else ""


def load(cache: Any, key: Optional[tuple], functions: Mapping[str, Callable], builtins: Mapping[str, tuple],
         helpers: Mapping[str, Any], name: str, filename: str,
         make: Callable[[], tuple[str, Mapping[str, Any]]]) -> tuple[Callable, str]:
    """(the function `name` of a generated program, its Python source): recalled from `cache` under `key` when it
    was kept there, else `make()` -> (source, the namespace entries it adds to `helpers`), compiled (by
    `cache.compile(python, filename)` when the cache answers Python's compile, language/checks.py) and kept. What
    cel/compiler.py and cel/templates.py share. Unsupported when the source is too deep for Python's compiler."""
    found = recall(cache, key, functions, builtins)
    if found is not None:
        python, code, extras = found
    else:
        python, extras = make()
        try:
            code = cache.compile(python, filename) if cache is not None else compile(python, filename, "exec")
        except (SyntaxError, RecursionError) as exc:  # e.g. more nested blocks than Python allows
            raise Unsupported(f"too deeply nested for the native compiler: {exc}") from None
        remember(cache, key, python, code, extras, functions, builtins)
    namespace = dict(helpers, **extras)
    exec(code, namespace)  # our own generated source, built from parsed trees: no user text is executed
    return namespace[name], python


def recall(cache: Any, key: Optional[tuple], functions: Mapping[str, Callable],
           builtins: Mapping[str, tuple]) -> Optional[tuple[str, CodeType, dict]]:
    """The program kept under `key` by `cache` (duck-typed: `recall_program(*key) -> bytes | None`), if any;
    `key` None: the caller's cache keeps no programs."""
    if key is None:
        return None
    try:
        data = cache.recall_program(identity(), *key)
    except OSError:  # the package's own files unreadable: nothing can be trusted, and nothing is kept
        return None
    return decode(data, functions, builtins) if data is not None else None


def remember(cache: Any, key: Optional[tuple], python: str, code: CodeType, extras: Mapping[str, Any],
             functions: Mapping[str, Callable], builtins: Mapping[str, tuple]) -> None:
    """Keep a program just generated under `key` (`cache.remember_program(*key, data=...)`), when it can be kept."""
    if key is not None:
        data = encode(python, code, extras, functions, builtins)
        if data is not None:
            try:
                cache.remember_program(identity(), *key, data=data)
            except OSError:
                pass


def encode(python: str, code: CodeType, extras: Mapping[str, Any], functions: Mapping[str, Callable],
           builtins: Mapping[str, tuple]) -> Optional[bytes]:
    """The bytes of a program (source, code and the namespace entries it adds to the helpers), or None when one of
    those entries can be neither written as data nor named."""
    ids, _ = _tables(functions, builtins)
    entries = []
    for name, value in extras.items():
        if _plain(value):
            entries.append((name, "v", value))
        elif id(value) in ids:
            entries.append((name, "n", ids[id(value)]))
        else:
            return None
    return marshal.dumps((python, code, tuple(entries)))


def decode(data: bytes, functions: Mapping[str, Callable],
           builtins: Mapping[str, tuple]) -> Optional[tuple[str, CodeType, dict]]:
    """(python, code, extras) of what `encode` wrote, or None for anything else."""
    try:
        python, code, entries = marshal.loads(data)
        _, names = _tables(functions, builtins)
        extras = {}
        for name, tag, value in entries:
            if tag == "v":
                extras[name] = value
            elif tag == "n" and value in names:
                extras[name] = names[value]
            else:
                return None
    except (ValueError, EOFError, TypeError):
        return None
    if type(python) is not str or not isinstance(code, CodeType):
        return None
    return python, code, extras
