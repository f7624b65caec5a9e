"""Manifests on disk or stdin -> `Resource`s with file/line origins.

One pass of libyaml (``CSafeLoader``) yields both the composed node, kept for
line/column look-ups of findings, and the constructed Python object: positions
cost nothing until a finding asks for one.
"""

from __future__ import annotations

import functools
import gc
import os
import stat
import sys
from contextlib import contextmanager
from typing import Iterable, Iterator, Optional

import yaml

from webhook.k8s.kindnames import kind_problem
from webhook.k8s.workload import kind_table
from webhook.model.resource import InputError, Origin, Resource
from webhook.model.goyaml import resolve
from webhook.model.yamlkeys import entry, key_name, mark_spelt
from webhook.inputs.yamlnodes import ValueRefused, check_expansion, construct, scalar

try:
    _Base = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml is part of PyYAML's wheels
    _Base = yaml.SafeLoader


class _Loader(_Base):
    """libyaml's safe loader: one pass yields the composed nodes (kept for positions) and the objects.

    libyaml composes in C but calls back into Python for every node: `resolve` (the implicit tag of a scalar) and
    the path-resolver hooks. The tag is go-yaml v2's (webhook/model/goyaml.py: what kubectl and the API server
    read, not PyYAML's YAML 1.1: `0o10`, `08`, `1e3`, `y` are numbers and booleans, `1:30` and `2001-12-14`
    strings), decided here because the resolver is where a scalar is known to be plain (an anchor does not change
    that; `!!str y` or a quote does), so a node tagged `str` is a string to Kubernetes too. Manifests repeat the
    same scalars (`name`, `image`, `Always`, `"1"`), so `resolve` is answered from a memo: a fifth less time to
    load (bench/RESULTS.md). The memo is sound because `_resolve` depends only on its arguments (the hooks that
    would follow paths are no-ops: no resolution depends on where a node is). Bounded: at most 4,096 entries, and
    emptied whenever the texts read since it was last emptied exceed _MEMO_TEXT, so what it keeps alive is at most
    that much text.

    Every node is constructed as go-yaml builds it (`construct_go`): a scalar by its tag (yamlnodes.scalar, the
    node walk's own), a sequence or map whatever its tag (go-yaml ignores `!!set`, `!!omap`, `!foo` there). Maps
    (the documents yamlnodes leaves to PyYAML: merge keys) have the keys Kubernetes makes of them, strings, as
    yamlnodes' own (webhook/model/yamlkeys.py); duplicates were refused before.
    """

    def construct_go(self, node):
        if isinstance(node, yaml.ScalarNode):
            return scalar(node)
        return self._collection(node)

    def _collection(self, node):  # a generator, as PyYAML's own: an alias may refer to the list or map being built
        if isinstance(node, yaml.SequenceNode):
            data: list = []
            yield data
            data.extend(self.construct_sequence(node))
        else:
            data = {}
            yield data
            data.update(self.construct_mapping(node))

    def construct_mapping(self, node, deep=False):
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(None, None, f"expected a mapping node, but found {node.id}",
                                                    node.start_mark)
        self.flatten_mapping(node)  # merged pairs first, so the map's own keys win, as in PyYAML
        mapping = {}
        for key_node, value_node in node.value:
            name = key_name(key_node)
            if name != key_node.value:
                mark_spelt(node)  # its position look-ups spell its keys
            mapping[name] = self.construct_object(value_node, deep=deep)
        return mapping


def _resolve(kind, value: str, implicit: tuple) -> str:
    """go-yaml v2's tag of a node: a plain scalar's by goyaml.resolve (a timestamp is a string to it, `<<` the
    merge key), a quoted or `!`-tagged one a string, a sequence or map by its kind."""
    if kind is yaml.ScalarNode:
        return resolve(value)[0] if implicit[0] else _STR
    return _SEQ if kind is yaml.SequenceNode else _MAP


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_Loader.yaml_constructors = {None: _Loader.construct_go}  # every tag, as go-yaml reads it
_Loader.descend_resolver = {}.get  # (parent, index) -> index: nothing to follow
_Loader.ascend_resolver = ().__len__  # () -> 0
_Loader.resolve = staticmethod(functools.lru_cache(maxsize=4096)(_resolve))
_MEMO_TEXT = 8 * 1024 * 1024
_memo_fill = 0


MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
_SKIPPED_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox"}


class Loaded:
    resources: list[Resource]
    errors: list[InputError]
    skipped: list[InputError]  # not Kubernetes objects (e.g. Helm templates)

    def __init__(self, resources: list[Resource] | None = None, errors: list[InputError] | None = None,
                 skipped: list[InputError] | None = None) -> None:
        self.resources = [] if resources is None else resources
        self.errors = [] if errors is None else errors
        self.skipped = [] if skipped is None else skipped

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


def load_paths(paths: Iterable[str], stdin_name: str = "<stdin>", freeze: bool = False,
               templates: bool = True) -> Loaded:
    """Every object of the paths. `templates=False` for aiadmit's own files (policies, tests): there `{{ }}` is a
    message template, not Helm's, so a YAML error in such a file is reported where it is, not skipped as a
    template to render."""
    with collector_paused(freeze):
        return _load_paths(paths, stdin_name, templates)


def _load_paths(paths: Iterable[str], stdin_name: str, templates: bool = True) -> Loaded:
    loaded = Loaded()
    for path in iter_manifest_files(paths):
        if path == "-":
            text, name = sys.stdin.read(), stdin_name
        else:
            text, error = read_text(path)
            if error is not None:
                loaded.errors.append(error)
                continue
            name = path
        # An empty pipe is a failed producer (`helm template ... | aiadmit audit -` without helm), not a clean input.
        # An empty file is left alone: repositories hold placeholders, and pre-commit names every changed file.
        if path == "-" and is_empty(text):
            loaded.errors.append(InputError(name, 0, "empty input: no YAML document in it (did the command that "
                                                     "should have written it fail?)"))
            continue
        loaded.extend(load_text(text, name, templates))
    return loaded


def is_empty(text: str) -> bool:
    """Whether a text holds no YAML content at all: nothing but blanks, comments and document markers."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and stripped not in ("---", "..."):
            return False
    return True


def read_text(path: str, newline: Optional[str] = None) -> tuple[Optional[str], Optional[InputError]]:
    """(a manifest file's text, None), or (None, the error that names it) when it cannot be read as UTF-8.

    `newline` is `open`'s: the audit reads universal newlines, the fixer (`newline=""`) keeps a file's own line
    endings so that what it writes back differs only where it fixed something.

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
        with open(descriptor, encoding="utf-8", newline=newline, closefd=True) as handle:
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


def _templated_line(text: str, exc: yaml.YAMLError) -> bool:
    """Whether the line a document's YAML error is on holds a Helm action (`{{ ... }}`)."""
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return False
    start = 0
    for _ in range(mark.line):
        start = text.find("\n", start) + 1
        if start == 0:
            return False
    end = text.find("\n", start)
    return looks_templated(text[start:end if end >= 0 else len(text)])


def _template(filename: str, exc: yaml.YAMLError) -> InputError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return InputError(filename, _mark_line(exc), "template (contains '{{ }}'): render it first",
                      mark.column + 1 if mark is not None else 0)


def load_text(text: str, filename: str, templates: bool = True) -> Loaded:
    """Every Kubernetes object in a (multi-document) YAML or JSON text (`templates`: see load_paths)."""
    global _memo_fill
    loaded = Loaded()
    _memo_fill += len(text)
    if _memo_fill > _MEMO_TEXT and hasattr(_Loader.resolve, "cache_clear"):
        _Loader.resolve.cache_clear()
        _memo_fill = len(text)
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
                if isinstance(exc, ValueRefused):
                    exc.name_field(node)
                if templates and _templated_line(text, exc):  # `name: {{ .Values.x }}` parses as a flow map
                    loaded.skipped.append(_template(filename, exc))
                else:
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
        if templates and looks_templated(text):
            loaded.skipped.append(_template(filename, exc))
        else:
            loaded.errors.append(_yaml_error(filename, exc))
    finally:
        loader.dispose()
    return loaded


_IDENTITY = {"apiversion": "apiVersion", "kind": "kind", "metadata": "metadata", "spec": "spec"}


def _key_position(node: yaml.Node, key: str) -> tuple[int, int]:
    """1-based line and column of a top-level key of a document (the document's start if absent)."""
    mark = node.start_mark
    if isinstance(node, yaml.MappingNode):
        found = entry(node, key)
        if found is not None:
            mark = found[0].start_mark
    return mark.line + 1, mark.column + 1


def identity_problem(data: dict) -> Optional[tuple[str, str]]:
    """(top-level key to point at, why this document is a broken Kubernetes object), or None.

    A document that is plainly meant as an object (it has an apiVersion, a known kind, or metadata and a spec) and
    that the API server would reject for its identity would otherwise be dropped as "not ours", a silent pass.
    """
    for key in data:
        if isinstance(key, str) and key.lower() in _IDENTITY and key != _IDENTITY[key.lower()]:
            return key, (f"key {key!r} must be spelt {_IDENTITY[key.lower()]!r}: Kubernetes field names are "
                         f"case-sensitive")
    kind, version = data.get("kind"), data.get("apiVersion")
    if version is None and kind is None:
        if isinstance(data.get("metadata"), dict) and isinstance(data.get("spec"), dict):
            return "metadata", "a Kubernetes object needs apiVersion and kind; this one has neither"
        return None
    if kind is None or kind == "":
        return "apiVersion", f"apiVersion {version!r} without a kind: not a Kubernetes object"
    if not isinstance(kind, str):
        return "kind", f"kind must be a string, not {type(kind).__name__}"
    if version is None:
        if isinstance(data.get("metadata"), dict) or any(k == kind for _, k in kind_table()):
            return "kind", f"kind {kind} without an apiVersion: not a Kubernetes object"
        return None
    if not isinstance(version, str):
        return "apiVersion", f"apiVersion must be a string, not {type(version).__name__}"
    group = version.rsplit("/", 1)[0] if "/" in version else ""
    if kind.endswith("List") and isinstance(data.get("items"), list):
        return None
    problem = kind_problem(group, kind)
    return ("kind", problem) if problem else None


def _collect(data: object, node: yaml.Node, filename: str, index: int, loaded: Loaded) -> None:
    if data is None:
        return
    line = node.start_mark.line + 1
    if not isinstance(data, dict):
        if isinstance(data, list) and all(isinstance(d, dict) and "kind" in d for d in data) and data:
            loaded.errors.append(InputError(filename, line, "a list of objects is not a Kubernetes object: "
                                            "wrap it in 'kind: List' with 'items'"))
        return  # a scalar or foreign document: not ours to judge
    problem = identity_problem(data)
    if problem is not None:
        line, column = _key_position(node, problem[0])
        loaded.errors.append(InputError(filename, line, problem[1], column))
        return
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
