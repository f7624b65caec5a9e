"""Where a finding points, in the coordinates its input has.

A file gives file, line and column; standard input (``helm template ... |
aiadmit audit -``) has lines only in a stream nobody edits, so the resource
and field are what a person needs; a live cluster gives context, namespace,
kind and name. Every report format asks this module, so they all agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from webhook.model import pointer as jp

STDIN_NAMES = ("<stdin>", "-")


@dataclass(frozen=True, repr=False)
class Location:
    file: Optional[str]  # None for a live cluster
    line: int  # 0 when unknown
    column: int
    resource: str  # "Kind namespace/name"
    field: str  # dotted path, "" for the object itself
    cluster: Optional[str] = None  # kubeconfig context of a live audit

    @property
    def from_stdin(self) -> bool:
        return self.file in STDIN_NAMES

    def short(self) -> str:
        """The prefix of a text line: `file:line:col` for files, the resource otherwise."""
        if self.cluster is not None:
            return f"{self.cluster}: {self.resource}"
        if self.file and not self.from_stdin and self.line:
            return f"{self.file}:{self.line}:{self.column}"
        if self.file and not self.from_stdin:
            return self.file
        return f"{self.file or '<input>'}: {self.resource}"


def locate(finding) -> Location:
    origin = finding.resource.origin
    line, column = finding.position() if origin.located else (0, 0)
    return Location(file=origin.file, line=line, column=column, resource=finding.resource.describe(),
                    field=jp.to_dotted(finding.pointer), cluster=origin.cluster)


def group_key_of(resource) -> str:
    """The heading a resource's findings are grouped under in the text report: its file, or its cluster context."""
    origin = resource.origin
    if origin.cluster is not None:
        return f"cluster {origin.cluster}"
    return origin.file or "<input>"
