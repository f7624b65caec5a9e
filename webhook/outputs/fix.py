"""`aiadmit fix`: write the mutating webhook's patch back into the YAML files.

For each Kubernetes object of a file the engine computes the very JSON Patch
the mutating webhook would return (`Engine.mutate`, with the file's other
documents as cluster facts, like the audit); the operations (only `add`, onto
a map key or the end of a list) are then applied to a ruamel.yaml round-trip
tree of that document, so comments, key order, quoting and flow style survive.

Only documents that change are re-serialised: the file is cut at its `---`
separators and every other document keeps its bytes. A re-serialised document
is read back with the audit's own loader and must equal the patched object,
or the file is left alone with an error: a fixer must never write something
other than what the webhook would admit. A second run finds nothing to add,
because the engine's mutations are idempotent.
"""

from __future__ import annotations

import copy
import difflib
import io
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError as RuamelError

from webhook.model import patch
from webhook.model import pointer as jp
from webhook.outputs import jsonfix
from webhook.outputs.atomicfile import write_atomic
from webhook.outputs.jsonfix import is_json
from webhook.engine.core import Engine
from webhook.model.facts import OfflineFacts
from webhook.model.resource import InputError
from webhook.inputs.sources import _Loader, iter_manifest_files, load_text, read_text

_SEPARATOR = re.compile(r"^---(?:[ \t].*)?\r?$")


@dataclass
class FileFix:
    path: str
    original: str = ""
    fixed: str = ""
    operations: dict = field(default_factory=dict)  # "Kind ns/name" -> [(policy, op)]
    errors: list[InputError] = field(default_factory=list)  # the file was left alone
    warnings: list[InputError] = field(default_factory=list)  # a mutation that could not apply (the webhook warns)
    skipped: list[InputError] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return not self.errors and self.fixed != self.original

    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.original.splitlines(keepends=True),
                                            self.fixed.splitlines(keepends=True),
                                            fromfile=self._label("a"), tofile=self._label("b")))

    def _label(self, side: str) -> str:
        return self.path if os.path.isabs(self.path) else f"{side}/{self.path}"


@dataclass
class _Segment:
    first_line: int  # 0-based line of the separator (or of the file start)
    separator: str  # the `---` line itself, verbatim ("" for the part before the first one)
    body: str


def split_documents(text: str) -> list[_Segment]:
    """The text cut before every column-0 `---` line; joining the pieces gives the text back."""
    segments = [_Segment(0, "", "")]
    for number, line in enumerate(text.splitlines(keepends=True)):
        if _SEPARATOR.match(line.rstrip("\n")):
            segments.append(_Segment(number, line, ""))
        else:
            segments[-1].body += line
    return segments


def _segment_of(segments: list[_Segment], line: int) -> int:
    """Index of the segment holding 0-based `line`."""
    found = 0
    for index, segment in enumerate(segments):
        if segment.first_line <= line:
            found = index
    return found


def guess_indent(body: str) -> tuple[int, int, int]:
    """(mapping indent, sequence indent, dash offset) most used in a document, in ruamel.yaml's terms.

    Measured on every `key:` line that opens a block and the line below it: a
    nested key gives the mapping indent; a `- ` item gives the dash's offset under
    its key and, with the spaces after the dash, the column of the item's content
    (`sequence` = offset + dash + those spaces). The style a file already uses is
    the style the added lines must follow (a 4-space file with `-   name:` items
    keeps them).
    """
    mapping: Counter = Counter()
    offsets: Counter = Counter()
    gaps: Counter = Counter()
    previous = None  # (indent, opens a block)
    for line in body.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        is_item = stripped.startswith("- ")
        content = stripped[1:].lstrip() if is_item else stripped
        if is_item and content:
            gaps[len(stripped) - len(content)] += 1
        if previous is not None and previous[1] and indent >= previous[0]:
            if is_item or stripped == "-":
                offsets[indent - previous[0]] += 1
            elif indent > previous[0]:
                mapping[indent - previous[0]] += 1
        opens = content.endswith(":") and not content.startswith(("'", '"', "{", "["))
        previous = (indent + (len(stripped) - len(content)) if is_item else indent, opens)
    indent = mapping.most_common(1)[0][0] if mapping else 2
    offset = offsets.most_common(1)[0][0] if offsets else 0
    gap = gaps.most_common(1)[0][0] if gaps else 2
    return indent, offset + gap, offset


def _round_trip(body: str) -> tuple[object, YAML]:
    indent, sequence, offset = guess_indent(body)
    handler = YAML(typ="rt")
    handler.preserve_quotes = True
    handler.width = 4096  # never re-wrap a long line someone wrote on one line
    handler.indent(mapping=indent, sequence=sequence, offset=offset)
    return handler.load(body), handler


def _to_ruamel(value):
    """Plain CEL output -> ruamel containers: `name` first (as people write volumes and mounts), then sorted.

    CEL maps have no stable order; a fixer whose output changed from run to run would churn diffs.
    """
    if isinstance(value, dict):
        out = CommentedMap()
        for key in sorted(value, key=lambda k: (k != "name", str(k))):
            out[key] = _to_ruamel(value[key])
        return out
    if isinstance(value, list):
        return CommentedSeq(_to_ruamel(v) for v in value)
    return value


def apply_operation(document, operation: dict) -> None:
    """One JSON Patch `add` onto a ruamel tree (model/patch.py; values as ruamel containers, `name` first)."""
    patch.apply(document, operation, convert=_to_ruamel)


BUILTIN_PRIORITY_CLASSES = ("system-cluster-critical", "system-node-critical")  # every cluster has these


def _unknown_class(operation: dict, facts: OfflineFacts) -> Optional[str]:
    """The PriorityClass an operation writes that the input does not define, or None.

    A fixer must not invent cluster objects: a class that does not exist makes the API server reject every pod of
    the workload. Offline, the input's own PriorityClass documents are all that is known.
    """
    if not operation["path"].endswith("/priorityClassName") or not isinstance(operation["value"], str):
        return None
    name = operation["value"]
    if name in BUILTIN_PRIORITY_CLASSES or name in (facts.priority_classes() or {}):
        return None
    return name


def fix_text(engine: Engine, text: str, path: str, policies: Optional[set] = None,
             skip: Optional[set] = None, assume_priority_classes: bool = False) -> FileFix:
    """The fixed text of one file. A PriorityClass name is written only when the input defines that class (or it
    is built in), unless `assume_priority_classes` says the target cluster has them; otherwise a warning says so."""
    result = FileFix(path=path, original=text, fixed=text)
    loaded = load_text(text, path)
    result.skipped = loaded.skipped
    if loaded.errors:
        result.errors = loaded.errors  # never rewrite a file we could not read completely
        return result
    facts = OfflineFacts(loaded.resources)
    pending: dict[int, list[tuple]] = {}  # node start line -> [(base, operations, patched, resource)]
    for resource in loaded.resources:
        mutation = engine.mutate(resource, facts)
        for problem in mutation.errors:  # the webhook admits with "mutation not applied": so do we
            line, column = resource.origin.position("")
            result.warnings.append(InputError(path, line, f"{resource.describe()}: mutation not applied: {problem}",
                                              column))
        chosen = [(policy, op) for policy, ops in mutation.by_policy.items() for op in ops
                  if (not policies or policy in policies) and not (skip and policy in skip)]
        if not assume_priority_classes:
            for policy, op in list(chosen):
                missing = _unknown_class(op, facts)
                if missing is not None:
                    chosen.remove((policy, op))
                    line, column = resource.origin.position(op["path"].rsplit("/", 1)[0])
                    result.warnings.append(InputError(path, line, (
                        f"{resource.describe()}: priorityClassName {missing!r} not written: no PriorityClass "
                        f"{missing!r} in the input. Install the classes (manifests/components/priority-classes, or "
                        f"the chart's priorityClasses.create) and pass --assume-priority-classes, or add the "
                        f"PriorityClass to these files"), column))
        if not chosen:
            continue
        order = {id(op): i for i, op in enumerate(mutation.operations)}
        chosen.sort(key=lambda pair: order[id(pair[1])])
        result.operations[resource.describe()] = chosen
        line = resource.origin.node.start_mark.line
        pending.setdefault(line, []).append((resource.origin.base, chosen, mutation, resource))
    if result.errors or not pending:
        return result
    if is_json(path, text):
        _fix_json(result, text, pending)
        return result

    segments = split_documents(text)
    for line, changes in pending.items():
        segment = segments[_segment_of(segments, line)]
        try:
            document, handler = _round_trip(segment.body)
            for base, chosen, _, _ in changes:
                for _, operation in chosen:
                    apply_operation(document, dict(operation, path=base + operation["path"]))
            stream = io.StringIO()
            handler.dump(document, stream)
            new_body = stream.getvalue()
        except (RuamelError, ValueError, KeyError, IndexError, TypeError) as exc:
            first = changes[0][3]
            result.errors.append(InputError(path, line + 1, f"{first.describe()}: cannot rewrite this document: {exc}"))
            continue
        problem = _verify(new_body, changes)
        if problem:
            result.errors.append(InputError(path, line + 1, f"{changes[0][3].describe()}: {problem}"))
            continue
        if "\r\n" in segment.body:
            new_body = new_body.replace("\r\n", "\n").replace("\n", "\r\n")
        if not segment.body.endswith("\n") and new_body.endswith("\n"):
            new_body = new_body.rstrip("\r\n")
        segment.body = new_body
    if not result.errors:
        result.fixed = "".join(s.separator + s.body for s in segments)
    return result


def _fix_json(result: FileFix, text: str, pending: dict) -> None:
    """A JSON file stays JSON: the additions are inserted as text (outputs/jsonfix.py), then checked like YAML."""
    changes = [change for line in sorted(pending) for change in pending[line]]
    first = changes[0][3]
    try:
        original = json.loads(text)
        expected = copy.deepcopy(original)
        for base, chosen, _, _ in changes:
            for _, operation in chosen:
                apply_operation(expected, dict(operation, path=base + operation["path"]))
        new_text = jsonfix.rewrite(text, first.origin.node, original, expected)
        if json.loads(new_text) != expected:
            raise jsonfix.JsonEditError("the edited text does not read back as the patched object")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        line = first.origin.node.start_mark.line + 1
        result.errors.append(InputError(result.path, line, f"{first.describe()}: cannot rewrite this JSON document: {exc}"))
        return
    problem = _verify(new_text, changes)
    if problem:
        result.errors.append(InputError(result.path, first.origin.node.start_mark.line + 1,
                                        f"{first.describe()}: {problem}"))
        return
    result.fixed = new_text


def _verify(new_body: str, changes: list[tuple]) -> Optional[str]:
    """The rewritten document, read by the audit's loader, must be the object plus exactly these operations.

    Without --policy/--skip that is the webhook's own patched object (`Mutation.patched`).
    """
    try:
        data = yaml.load(new_body, Loader=_Loader)
    except yaml.YAMLError as exc:
        return f"rewritten document does not parse: {exc}"
    for base, chosen, _, resource in changes:
        expected = copy.deepcopy(resource.obj)
        for _, operation in chosen:
            apply_operation(expected, operation)
        got = jp.resolve(data, base) if base else data
        if got != expected:
            return "the rewritten document is not the object plus the webhook's patch (file left alone)"
    return None


def fix_paths(engine: Engine, paths: list[str], write: bool = True, policies: Optional[set] = None,
              skip: Optional[set] = None, assume_priority_classes: bool = False) -> list[FileFix]:
    results = []
    for path in iter_manifest_files(paths):
        # The audit's reader: a FIFO, a device or a socket named *.yaml (or a symlink to /dev/zero) is an error
        # for that file, never a read that blocks or does not end.
        text, error = read_text(path, newline="")
        if error is not None:
            results.append(FileFix(path=path, errors=[error]))
            continue
        result = fix_text(engine, text, path, policies, skip, assume_priority_classes)
        if write and result.changed:
            write_atomic(path, result.fixed.encode("utf-8"), os.stat(path).st_mode & 0o7777)
        results.append(result)
    return results
