"""Manifests on disk or stdin -> `Resource`s with file/line origins.

One pass of libyaml (``CSafeLoader``) yields both the composed node, kept for
line/column look-ups of findings, and the constructed Python object: positions
cost nothing until a finding asks for one.
"""

from __future__ import annotations

import gc
import os
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Iterable, Iterator, Optional

import yaml

from webhook.model.resource import InputError, Origin, Resource
from webhook.inputs.yamlnodes import check_expansion, construct

try:
    _Base = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml is part of PyYAML's wheels
    _Base = yaml.SafeLoader


class _Loader(_Base):
    """libyaml's safe loader, with the implicit tag of every scalar memoised in C.

    libyaml calls back into PyYAML's Python resolver for every node, which
    tries a list of regular expressions for each scalar; manifests repeat the
    same keys and values ("name", "image", "Always", "1") endlessly. The memo
    is keyed on all the resolution depends on (kind, text, implicit flags: no
    path resolvers are registered on safe loaders), and is an `lru_cache`, so a
    hit costs no Python frame at all: 15 % of composing (bench/RESULTS.md). Bounded, so a repository of
    long unique scripts cannot make it grow without end.
    """

    def __init__(self, stream):
        super().__init__(stream)
        self.resolve = _RESOLVE  # an instance attribute: libyaml's composer looks it up on every node
        # The composer also calls these two around every node, for path resolvers, which safe loaders have none
        # of: PyYAML's methods return at once, but each is a Python frame (6 % of composing). C callables that
        # take the same arguments and do nothing of consequence stand in for them.
        self.descend_resolver = slice  # (parent node, index) -> a throwaway slice object
        self.ascend_resolver = tuple  # () -> the empty tuple


_RESOLVE = lru_cache(maxsize=4096)(partial(_Base.resolve, _Base("")))

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
_SKIPPED_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox"}


@dataclass
class Loaded:
    resources: list[Resource] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    skipped: list[InputError] = field(default_factory=list)  # not Kubernetes objects (e.g. Helm templates)

    def extend(self, other: "Loaded") -> None:
        self.resources += other.resources
        self.errors += other.errors
        self.skipped += other.skipped


def iter_manifest_files(paths: Iterable[str]) -> Iterator[str]:
    """Files named on the command line as they are; directories walked for manifest suffixes, sorted."""
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            yield path
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
            for name in sorted(files):
                if name.endswith(MANIFEST_SUFFIXES):
                    yield os.path.join(root, name)


@contextmanager
def collector_paused(freeze: bool = False):
    """Pause Python's cyclic garbage collector while loading; with `freeze`, move everything out of its reach.

    Loading allocates millions of small acyclic objects (nodes, maps, strings) that
    stay alive; every collection the allocation triggered would walk all of them
    again, which made loading 5,000 objects 3x slower than loading 179 (measured:
    bench/RESULTS.md). `gc.freeze()` keeps later collections from rescanning them,
    but it freezes every object of the process, garbage included: only a one-shot
    command may ask for it, never a server that reloads its policies.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if freeze:
                gc.freeze()
            gc.enable()


def load_paths(paths: Iterable[str], stdin_name: str = "<stdin>", freeze: bool = False) -> Loaded:
    with collector_paused(freeze):
        return _load_paths(paths, stdin_name)


def _load_paths(paths: Iterable[str], stdin_name: str) -> Loaded:
    loaded = Loaded()
    for path in iter_manifest_files(paths):
        if path == "-":
            loaded.extend(load_text(sys.stdin.read(), stdin_name))
            continue
        text, error = read_text(path)
        if error is not None:
            loaded.errors.append(error)
            continue
        loaded.extend(load_text(text, path))
    return loaded


def read_text(path: str) -> tuple[Optional[str], Optional[InputError]]:
    """(a manifest file's text, None), or (None, the error that names it) when it cannot be read as UTF-8.

    Only regular files are read. A FIFO (or a device, or a socket) named `*.yaml` would block the reader forever
    or never end: it is opened without blocking, found not to be a regular file by the descriptor itself (so
    nothing can be swapped in between a check and the open), and reported.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        return None, InputError(path, 0, f"cannot read file: {exc.strerror or exc}")
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            os.close(descriptor)
            return None, InputError(path, 0, f"not a regular file ({_file_type(mode)}): skipped")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        with open(descriptor, encoding="utf-8", closefd=True) as handle:
            return handle.read(), None
    except (OSError, UnicodeDecodeError) as exc:
        return None, InputError(path, 0, f"cannot read file: {exc}")


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a file"


def looks_templated(text: str) -> bool:
    return "{{" in text and "}}" in text


def load_text(text: str, filename: str) -> Loaded:
    """Every Kubernetes object in a (multi-document) YAML or JSON text."""
    loaded = Loaded()
    loader = _Loader(text)
    aliases = "&" in text  # an alias needs an anchor, and an anchor an `&`
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            try:
                if aliases:
                    check_expansion(node)
                data = construct(node, loader.construct_document, aliases)
            except yaml.YAMLError as exc:
                loaded.errors.append(_yaml_error(filename, exc))
                index += 1
                continue
            except RecursionError:
                loaded.errors.append(InputError(filename, node.start_mark.line + 1, "YAML: document nests too deeply",
                                                node.start_mark.column + 1))
                index += 1
                continue
            except (ValueError, OverflowError, TypeError) as exc:  # PyYAML's constructors on odd scalars
                loaded.errors.append(InputError(filename, node.start_mark.line + 1, f"YAML: cannot read: {exc}",
                                                node.start_mark.column + 1))
                index += 1
                continue
            _collect(data, node, filename, index, loaded)
            index += 1
    except yaml.YAMLError as exc:
        if looks_templated(text):
            loaded.skipped.append(InputError(filename, _mark_line(exc), "template (contains '{{ }}'): render it first"))
        else:
            loaded.errors.append(_yaml_error(filename, exc))
    finally:
        loader.dispose()
    return loaded


def _collect(data: object, node: yaml.Node, filename: str, index: int, loaded: Loaded) -> None:
    if data is None:
        return
    line = node.start_mark.line + 1
    if not isinstance(data, dict):
        if isinstance(data, list) and all(isinstance(d, dict) and "kind" in d for d in data) and data:
            loaded.errors.append(InputError(filename, line, "a list of objects is not a Kubernetes object: "
                                            "wrap it in 'kind: List' with 'items'"))
        return  # a scalar or foreign document: not ours to judge
    kind = data.get("kind")
    if not isinstance(kind, str) or "apiVersion" not in data:
        return  # configuration of some other tool (values.yaml, kustomization patches, ...)
    if kind.endswith("List") and isinstance(data.get("items"), list):
        for position, item in enumerate(data["items"]):
            if isinstance(item, dict) and isinstance(item.get("kind"), str):
                origin = Origin(file=filename, document=index, node=node, base=f"/items/{position}")
                loaded.resources.append(Resource(item, origin))
        return
    loaded.resources.append(Resource(data, Origin(file=filename, document=index, node=node)))


def _mark_line(exc: yaml.YAMLError) -> int:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return mark.line + 1 if mark is not None else 0


def _yaml_error(filename: str, exc: yaml.YAMLError) -> InputError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"YAML: {context + ', ' if context else ''}{problem}"
    if mark is None:
        return InputError(filename, 0, message)
    return InputError(filename, mark.line + 1, message, mark.column + 1)
