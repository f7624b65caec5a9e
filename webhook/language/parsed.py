"""Policy files' documents as read before: what spares a command-line run reading the bundle's YAML again.

Why: reading the 18 built-in policy files (libyaml calling back into Python for every node, go-yaml's scalar
rules, the object checks) was 64.5 M of a warm one-file audit's 841 M instructions (bench/RESULTS.md, 2026-12-07), for
files that change only with the installation. The command line's disk cache keeps, per file, the documents it
held as JSON, under a digest of the file's text and of the code that reads it (webhook/inputs/*.py,
webhook/model/*.py, the kinds table and its checker, PyYAML's version).

What is kept is only what cannot tell it was not read now: a file whose every object is an aiadmit Policy document
of plain data (no input error, no skipped template, no List, no in-tree policy), read back as the same values.
What a recalled document lacks is its YAML node, which only a problem's position needs: the loader reads the files
again when a load finds any problem (language/loader.py), so every message is the one a fresh read gives. A torn
entry is a miss (the cache checks a digest); the webhook has no cache and always reads its files.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from functools import lru_cache
from typing import Any, Optional

import yaml

from webhook.cel.stored import feed
from webhook.inputs.sources import Loaded, collector_paused, load_text, read_text
from webhook.model.resource import Origin, Resource

_WEBHOOK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_READERS = ("inputs/*.py", "model/*.py", "k8s/kindnames.py", "k8s/kinds.yaml", "k8s/kindtable.py")


@lru_cache(maxsize=1)
def _code_identity() -> str:
    """A digest of the code that turns a file's text into its documents, and of PyYAML's version."""
    hashed = hashlib.sha256(f"{yaml.__version__} {getattr(yaml, '__with_libyaml__', False)}".encode())
    for pattern in _READERS:
        feed(hashed, _WEBHOOK, sorted(glob.glob(os.path.join(_WEBHOOK, pattern))))
    return hashed.hexdigest()


def _key(text: str) -> str:
    return hashlib.sha256((_code_identity() + "\0" + text).encode("utf-8", "surrogatepass")).hexdigest()


def _plain(value: Any) -> bool:
    """Whether `value` is JSON data of exactly the built-in types, which JSON reads back as the same values."""
    kind = type(value)
    if kind is str or kind is bool or kind is int or value is None:
        return True
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if kind is list:
        return all(_plain(item) for item in value)
    if kind is dict:
        return all(type(key) is str and _plain(item) for key, item in value.items())
    return False


def _keepable(loaded: Loaded) -> bool:
    return not loaded.errors and not loaded.skipped and all(
        resource.origin.base == "" and resource.obj.get("kind") == "Policy"
        and str(resource.obj.get("apiVersion", "")).startswith("aiadmit.dev/") and _plain(resource.obj)
        for resource in loaded.resources)


def _recalled(data: bytes, path: str) -> Optional[list[Resource]]:
    """The resources of a kept entry, or None when it is not one."""
    try:
        entries = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if type(entries) is not list:
        return None
    resources = []
    for entry in entries:
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not int or type(entry[1]) is not dict:
            return None
        resources.append(Resource(entry[1], Origin(file=path, document=entry[0])))
    return resources


def load(files: list[str], cache: Any) -> tuple[Loaded, bool]:
    """(every document of the policy files, whether any came from `cache`): read as `load_paths(files,
    templates=False)` reads them, each file's documents from the cache when it keeps them (duck-typed:
    `recall_documents(key) -> bytes | None`, `remember_documents(key, data)`, app/diskcache.py)."""
    loaded, recalled = Loaded(), False
    with collector_paused():
        for path in files:
            text, error = read_text(path)
            if error is not None:
                loaded.errors.append(error)
                continue
            key = _key(text)
            found = cache.recall_documents(key)
            resources = _recalled(found, path) if found is not None else None
            if resources is not None:
                loaded.resources += resources
                recalled = True
                continue
            read = load_text(text, path, templates=False)
            if _keepable(read):
                data = json.dumps([[resource.origin.document, resource.obj] for resource in read.resources])
                cache.remember_documents(key, data.encode("utf-8", "surrogatepass"))
            loaded.extend(read)
    return loaded, recalled
