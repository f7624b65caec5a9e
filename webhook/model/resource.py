"""A Kubernetes object plus where it came from.

Every entry point turns its input into `Resource`s: the admission adapter from a
review (uid, operation), the file adapter from a YAML document (file, document
index, composed node for line/column look-ups), the cluster adapter from a live
object (context). Nothing downstream needs to know which one it was.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Optional

import yaml

from webhook.model import pointer as jp
from webhook.model.yamlkeys import SPELT, entry, spelt_as
from webhook.model.valueclass import Compared, Frozen

_STR = "tag:yaml.org,2002:str"


class InputError(Frozen, Compared):
    """Input that could not be checked, with the place to fix it."""

    file: str
    line: int
    message: str
    column: int = 0

    def __init__(self, file: str, line: int, message: str, column: int = 0) -> None:
        object.__setattr__(self, "file", file)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "column", column)

    def _compared(self) -> tuple:
        """The fields `==` compares and the hash digests."""
        return (self.file, self.line, self.message, self.column)

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "column": self.column, "message": self.message}


class Origin:
    """Where a resource came from; only the fields of its own entry point are set."""

    file: Optional[str] = None
    document: Optional[int] = None
    node: Optional[yaml.Node] = None
    base: str = ""  # pointer of this object inside its document (items of a List)
    uid: Optional[str] = None
    operation: Optional[str] = None
    cluster: Optional[str] = None
    positions: Optional[dict] = None  # pointer -> (line, column), computed where the node was (audit workers)
    old_object: Optional[dict] = None  # an UPDATE review's `oldObject`: CEL's `oldObject`, read-only data

    def __init__(self, file: Optional[str] = None, document: Optional[int] = None, node: Optional[yaml.Node] = None,
                 base: str = "", uid: Optional[str] = None, operation: Optional[str] = None,
                 cluster: Optional[str] = None, positions: Optional[dict] = None,
                 old_object: Optional[dict] = None) -> None:
        self.file = file
        self.document = document
        self.node = node
        self.base = base
        self.uid = uid
        self.operation = operation
        self.cluster = cluster
        self.positions = positions
        self.old_object = old_object

    @property
    def located(self) -> bool:
        """Whether positions in the file are known (a YAML node, or positions computed from one)."""
        return self.node is not None or self.positions is not None

    def position(self, pointer: str) -> tuple[int, int]:
        """1-based line and column of the deepest node on `pointer` that exists (0, 0 if unknown).

        For a map entry the key's position is given: that is the line a person edits.
        """
        node = self.node
        if node is None:
            return (self.positions or {}).get(pointer, (0, 0))
        mark = node.start_mark
        for token in jp.split(self.base + pointer):
            if isinstance(node, yaml.MappingNode):
                for found in node.value:  # by its text: what yamlkeys.entry does, inline (this runs per finding)
                    key = found[0]
                    if key.value == token and (key.tag == _STR or spelt_as(key, token)):
                        break
                else:
                    found = entry(node, token) if getattr(node, SPELT, False) else None
                if found is None:
                    break
                mark, node = found[0].start_mark, found[1]
            elif isinstance(node, yaml.SequenceNode) and token.isdigit() and int(token) < len(node.value):
                node = node.value[int(token)]
                mark = node.start_mark
            else:
                break
        return (mark.line + 1, mark.column + 1)


class Resource:
    """An object and its origin. Its identity (kind, name, labels, ...) is read once: the engine asks for it many
    times per evaluation, and whoever changes an object (a mutation's working copy) makes a new Resource for it."""

    obj: dict
    origin: Origin

    def __init__(self, obj: dict, origin: Origin | None = None) -> None:
        self.obj = obj
        self.origin = Origin() if origin is None else origin

    @cached_property
    def kind(self) -> str:
        return str(self.obj.get("kind") or "")

    @cached_property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion") or "")

    @cached_property
    def group(self) -> str:
        version = self.api_version
        return version.rsplit("/", 1)[0] if "/" in version else ""

    @cached_property
    def metadata(self) -> dict:
        meta = self.obj.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @cached_property
    def name(self) -> str:
        return str(self.metadata.get("name") or self.metadata.get("generateName") or "")

    @cached_property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace") or "")

    @cached_property
    def labels(self) -> dict:
        labels = self.metadata.get("labels")
        return labels if isinstance(labels, dict) else {}

    @cached_property
    def annotations(self) -> dict:
        annotations = self.metadata.get("annotations")
        return annotations if isinstance(annotations, dict) else {}

    def ref(self) -> dict[str, Any]:
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"
