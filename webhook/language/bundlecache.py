"""A loaded bundle kept whole by the command line's disk cache: one entry for all its policies.

Why: a warm one-file audit (the pre-commit hook's run) still compiled every policy document (each Expression,
guard, variable and template built again from recalled documents and replayed checks: bench/RESULTS.md,
2026-12-07, h-boot), about a quarter of its instructions. The compiled policies and the in-tree ones are plain
objects; pickled right after a load that found no problem, they are that load's result for the next run with
the same inputs, read in one call.

What the entry is kept under, all of it (`key`): every file of the webhook package (its code, the kinds table,
the config's schema: whatever built or defines an object in the entry) by its size and modification time, the
versions of the libraries a compiled object may come from (PyYAML, re2, jsonschema: where they are installed and
when), the Python build, the policy language's schema (policies/policy.schema.json, outside the package in a
checkout) and each policy file by path and text, the params the config overrides, the CEL cost limits and whether
the bundle's record answers checks. A load with any problem is never kept, so a bundle that does not load is
compiled, and refused, every time. A torn entry (the cache's check), one that does not unpickle (a class gone),
or one that is not a (policies, in-tree, what it vouches for) triple is a miss: the bundle is loaded as always and
the entry rewritten. The load's `Checks` (an expression's memo) is written as a name (`_checks`) and read back as
the current run's, so the entry holds no cache directory. The entry also carries two things the run computes from
the package's own files and nothing else, vouched for by the same key: the CEL code's identity (cel/stored.py, the
prefix of every stored program's key) and the built-in kinds table (k8s/kindtable.py); a hit hands them down
(`vouch`) before either is first computed, so a warm run reads and digests no CEL source and builds no table. The
cache directory is the user's own and already holds code objects that runs execute (diskcache.py): a pickle there
adds no new trust. The webhook has no cache and never reads one.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
from functools import lru_cache
from typing import Any, Optional

try:  # pickle's own classes (pickle.py takes them from _pickle), without pickle.py's module body: ~1 % of a warm run
    from _pickle import Pickler, Unpickler, UnpicklingError
except ImportError:  # an interpreter without CPython's accelerator
    from pickle import Pickler, Unpickler, UnpicklingError

from webhook.cel import stored
from webhook.k8s import kindtable
from webhook.language.bundle import POLICY_SCHEMA_FILE
from webhook.language.checks import Checks, package_identity
from webhook.language.policy import Policy
from webhook.language.vapload import InTree
from webhook.model.valueclass import astuple

_WEBHOOK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CODE = (".py", ".yaml", ".json")


@lru_cache(maxsize=1)
def _code_identity() -> str:
    """Every webhook/**/{*.py,*.yaml,*.json} by its path, size and modification time (nanoseconds), the Python
    build and the libraries' installs. Not the files' text: digesting 1.3 MB of it cost 53 M instructions, more
    than a third of what the entry saves (bench/RESULTS.md, h-boot). Python itself takes a module's bytecode as
    current by its source's size and modification time (in seconds); an entry is stale only where that would be."""
    spelt = [sys.version, *map(package_identity, ("yaml", "re2", "jsonschema"))]
    for directory, subdirectories, names in os.walk(_WEBHOOK):
        subdirectories[:] = sorted(name for name in subdirectories if name != "__pycache__")
        for name in sorted(names):
            if name.endswith(_CODE):
                path = os.path.join(directory, name)
                found = os.stat(path)
                spelt.append(f"{path[len(_WEBHOOK):]} {found.st_size} {found.st_mtime_ns}")
    return hashlib.sha256("\0".join(spelt).encode("utf-8", "surrogateescape")).hexdigest()


def key(files: list[str], params: Any, limits: Any, checks: Checks) -> Optional[str]:
    """The digest the bundle of `files` loaded with these params and limits is kept under; None when a file does
    not read (the load then reports it)."""
    hashed = hashlib.sha256(_code_identity().encode())
    spelt = json.dumps([params, astuple(limits) if limits is not None else None, checks.use_record],
                       sort_keys=True, default=repr)
    hashed.update(spelt.encode("utf-8", "surrogatepass") + b"\0")
    for path in (POLICY_SCHEMA_FILE, *files):  # the schema decides what loads; in a checkout it is outside webhook/
        try:
            with open(path, "rb") as handle:
                text = handle.read()
        except OSError:
            return None
        hashed.update(os.path.abspath(path).encode("utf-8", "surrogateescape") + b"\0"
                      + str(len(text)).encode() + b"\0" + text)
    return hashed.hexdigest()


def recall(cache: Any, kept_as: str, checks: Checks) -> Optional[tuple[list[Policy], InTree]]:
    """The bundle kept under `kept_as`, its expressions given `checks`, or None (never kept, torn or foreign); a
    hit also vouches for the CEL code's identity and the kinds table it carries."""
    data = cache.recall_bundle(kept_as)
    if data is None:
        return None
    try:
        loaded = _Unpickler(io.BytesIO(data), checks).load()
    except Exception:  # noqa: BLE001 - any entry that does not read back is a miss, whatever the reason
        return None
    if (type(loaded) is not tuple or len(loaded) != 3 or type(loaded[0]) is not list
            or not all(isinstance(policy, Policy) for policy in loaded[0]) or not isinstance(loaded[1], InTree)
            or not _vouched(loaded[2])):
        return None
    identity, table = loaded[2]
    stored.vouch(identity)
    kindtable.vouch(table)
    return loaded[0], loaded[1]


def remember(cache: Any, kept_as: str, policies: list[Policy], intree: InTree) -> None:
    """Keep a load's result, and what the package's files decide (`_vouched`); a bundle holding anything pickle
    cannot write is simply not kept."""
    out = io.BytesIO()
    try:
        vouched = (stored.identity(), kindtable.kind_table())
        _Pickler(out, protocol=_PROTOCOL).dump((policies, intree, vouched))
    except Exception:  # noqa: BLE001 - a closure, a lock, a generated function, an unreadable file: not kept
        return
    cache.remember_bundle(kept_as, out.getvalue())


def _vouched(found: Any) -> bool:
    """Whether `found` has the shape of what `remember` keeps beside the bundle: (the CEL code's identity, the
    kinds table by (group, kind))."""
    if type(found) is not tuple or len(found) != 2 or type(found[0]) is not str or type(found[1]) is not dict:
        return False
    return all(type(key) is tuple and isinstance(spec, kindtable.KindSpec) for key, spec in found[1].items())


def _checks() -> Checks:
    """What a kept `Checks` is written as; only a recall (`_Unpickler`) knows which one it stands for."""
    raise UnpicklingError("a kept bundle's Checks read outside a recall")


_PROTOCOL = 5  # pickle.HIGHEST_PROTOCOL since Python 3.8; an entry of another protocol reads back all the same


class _Pickler(Pickler):
    # Not a persistent id: `persistent_id` is called for every object written (each string too), which made the
    # first run's pickling cost 48 M instructions; `reducer_override` only sees objects of classes of their own.
    def reducer_override(self, found: Any) -> Any:
        return (_checks, ()) if isinstance(found, Checks) else NotImplemented


class _Unpickler(Unpickler):
    def __init__(self, data: Any, checks: Checks):
        super().__init__(data)
        self.checks = checks

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_checks":
            return lambda: self.checks
        return super().find_class(module, name)
