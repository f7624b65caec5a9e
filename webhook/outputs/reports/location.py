"""Where a finding points, in the coordinates its input has.

A file gives file, line and column; standard input (``helm template ... |
aiadmit audit -``) has lines only in a stream nobody edits, so the resource
and field are what a person needs; a live cluster gives context, namespace,
kind and name. Every report format asks this module, so they all agree.
"""

from __future__ import annotations

from typing import Optional

from webhook.model import pointer as jp
from webhook.model.valueclass import Compared, Frozen

STDIN_NAMES = ("<stdin>", "-")


class Location(Frozen, Compared):
    file: Optional[str]  # None for a live cluster
    line: int  # 0 when unknown
    column: int
    resource: str  # "Kind namespace/name"
    field: str  # dotted path, "" for the object itself
    cluster: Optional[str] = None  # kubeconfig context of a live audit

    def __init__(self, file: Optional[str], line: int, column: int, resource: str, field: str,
                 cluster: Optional[str] = None) -> None:
        object.__setattr__(self, "file", file)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "column", column)
        object.__setattr__(self, "resource", resource)
        object.__setattr__(self, "field", field)
        object.__setattr__(self, "cluster", cluster)

    def _compared(self) -> tuple:
        """The fields `==` compares and the hash digests."""
        return (self.file, self.line, self.column, self.resource, self.field, self.cluster)

    @property
    def from_stdin(self) -> bool:
        return self.file in STDIN_NAMES

    def short(self) -> str:
        """The prefix of a text line: `file:line:col` for files, the resource otherwise."""
        return _short(self.file, self.line, self.column, self.resource, self.cluster)


def _short(file: Optional[str], line: int, column: int, resource: str, cluster: Optional[str]) -> str:
    if cluster is not None:
        return f"{cluster}: {resource}"
    if file and file not in STDIN_NAMES:
        return f"{file}:{line}:{column}" if line else file
    return f"{file or '<input>'}: {resource}"


def locate(finding) -> Location:
    origin = finding.resource.origin
    line, column = origin.position(finding.pointer) if origin.located else (0, 0)
    return Location(file=origin.file, line=line, column=column, resource=finding.resource.describe(),
                    field=jp.to_dotted(finding.pointer), cluster=origin.cluster)


class Places:
    """Where the findings of one resource point, for a text line: what they share (file, input kind) is worked out
    once, and each field's position is looked up once (several findings of an object often point at the same
    field). The same rules as `Location.short`, without a Location per finding: this runs per finding."""

    __slots__ = ("_resource", "_file", "_position", "_plain", "_seen")

    def __init__(self, resource):
        origin = resource.origin
        self._resource, self._file = resource, origin.file
        self._position = origin.position if origin.located else None
        # Only a file's line is a place a person edits; stdin and a cluster name the resource and field instead.
        self._plain = origin.cluster is None and bool(origin.file) and origin.file not in STDIN_NAMES
        self._seen: dict = {}

    def prefix(self, pointer: str) -> tuple[int, int, str]:
        """(line, column, what a text line about `pointer` begins with: `file:line:col`, or the resource and
        field where there is no line to point at)."""
        seen = self._seen.get(pointer)
        if seen is None:
            position = self._position
            line, column = position(pointer) if position is not None else (0, 0)
            if line and self._plain:
                seen = (line, column, f"{self._file}:{line}:{column}")
            else:
                seen = (line, column, self._named(pointer, line, column))
            self._seen[pointer] = seen
        return seen

    def _named(self, pointer: str, line: int, column: int) -> str:
        """The prefix of input without a line to point at: the resource, and the field unless a line says it."""
        origin = self._resource.origin
        where = _short(origin.file, line, column, self._resource.describe(), origin.cluster)
        field = jp.to_dotted(pointer) if origin.cluster is not None or origin.file in STDIN_NAMES or not line else ""
        return f"{where} {field}" if field else where


def group_key_of(resource) -> str:
    """The heading a resource's findings are grouped under in the text report: its file, or its cluster context."""
    origin = resource.origin
    if origin.cluster is not None:
        return f"cluster {origin.cluster}"
    return origin.file or "<input>"
