"""Shape checks of the fields aiadmit reads: a wrong type is a ShapeError naming the field, never a crash.

Kubernetes would reject these objects (its types are strict); an audit of files meets them before the API server
does, and a hostile client can send them to the webhook directly. Each check names the JSON pointer of the field,
so that the audit says file, line and field, and the webhook answers 400 with the field.
"""

from __future__ import annotations

from typing import Any

from webhook.model import pointer as jp
from webhook.model.quantity import QuantityError, parse_quantity


class ShapeError(ValueError):
    """A field of the wrong type where Kubernetes expects a certain shape."""

    def __init__(self, pointer: str, message: str):
        super().__init__(message)
        self.pointer = pointer
        self.message = message


def check_list_of_maps(value: Any, pointer: str, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ShapeError(pointer, f"{what} must be a list, not {type(value).__name__}")
    for position, item in enumerate(value):
        if not isinstance(item, dict):
            raise ShapeError(f"{pointer}/{position}", f"{what} items must be maps, not {type(item).__name__}")
    return value


def check_container(container: dict, pointer: str, rename: dict[str, str]) -> None:
    resources_field = rename.get("resources", "resources")
    resources = container.get(resources_field)
    if resources is not None:
        where = f"{pointer}/{jp.escape(resources_field)}"
        if not isinstance(resources, dict):
            raise ShapeError(where, f"resources must be a map, not {type(resources).__name__}")
        for section in ("requests", "limits"):
            values = resources.get(section)
            if values is None:
                continue
            if not isinstance(values, dict):
                raise ShapeError(f"{where}/{section}", f"resources.{section} must be a map")
            for name, quantity in values.items():
                try:
                    parse_quantity(quantity)
                except QuantityError as exc:
                    raise ShapeError(f"{where}/{section}/{jp.escape(name)}", str(exc)) from None
    for list_field in ("volumeMounts", "env", "envFrom", "ports"):
        check_list_of_maps(container.get(list_field), f"{pointer}/{list_field}", list_field)
    for str_list in ("command", "args"):
        value = container.get(str_list)
        if value is not None and not isinstance(value, list):
            raise ShapeError(f"{pointer}/{str_list}", f"{str_list} must be a list of strings")


def check_metadata(metadata: Any, pointer: str) -> None:
    """ShapeError unless `metadata` (when present) is a map whose labels and annotations are maps of strings.

    Tier, role, notebook and exemption are read from them: a list or a number there must be an answer naming the
    field, never a crash, and never "no labels" (which would be a silent pass for whatever they said).
    """
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise ShapeError(pointer, f"metadata must be a map, not {type(metadata).__name__}")
    for name in ("labels", "annotations"):
        value = metadata.get(name)
        if value is None:
            continue
        where = f"{pointer}/{name}"
        if not isinstance(value, dict):
            raise ShapeError(where, f"metadata.{name} must be a map of strings, not {type(value).__name__}")
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                shown = key if isinstance(key, str) else repr(key)
                raise ShapeError(f"{where}/{jp.escape(str(key))}",
                                 f"metadata.{name}[{shown}] must be a string, not {type(item).__name__}"
                                 if isinstance(key, str) else f"metadata.{name} keys must be strings, not {shown}")
