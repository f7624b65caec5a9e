"""JSON Schema checks of the documents aiadmit reads itself (policies, its config), remembered when they pass.

The checks are what make a broken policy or config fail to load with file,
line and field; they always run on a document the command line has not seen
pass before. A document whose exact text passed the exact schema under the
same validator passes again, so with a disk cache (webhook/app/diskcache.py) the
command line skips both the check and the import of `jsonschema` (together
0.075 s of every `aiadmit audit`, bench/RESULTS.md). The webhook has no cache
and checks everything at start.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Optional

from webhook.language import record as bundlecheck
from webhook.app import diskcache


@lru_cache(maxsize=8)
def validator(schema_file: str) -> Any:
    """The Draft 2020-12 validator of a schema file (jsonschema imported here, on first need)."""
    from jsonschema import Draft202012Validator

    with open(schema_file, encoding="utf-8") as handle:
        return Draft202012Validator(json.load(handle))


@lru_cache(maxsize=1)
def _jsonschema() -> str:
    return diskcache.package_identity("jsonschema")


@lru_cache(maxsize=8)
def _schema_text(schema_file: str) -> str:
    with open(schema_file, encoding="utf-8") as handle:
        return handle.read()


def errors(schema_file: str, document: Any, text: Optional[str], place: str) -> list:
    """The schema errors of `document`, sorted by path; `text` and `place` (its file's text and the document's
    index in it) say exactly which document it is, so a pass can be remembered. Without `text`, no memory."""
    if text is not None and bundlecheck.passed(_schema_text(schema_file), text):
        return []  # a document of the bundle as it was built, which passed then
    cache = diskcache.active() if text is not None else None
    key = ("schema", _schema_text(schema_file), _jsonschema(), place, text or "")
    if cache is not None and cache.recall(*key) is not None:
        return []
    found = sorted(validator(schema_file).iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    if not found and cache is not None:
        cache.remember(*key)
    return found


def locate_error(error: Any) -> tuple[str, str]:
    """(JSON pointer, message) of a validation error of a document a person wrote.

    An unknown field is reported at the field itself, not at the map that holds it,
    so the line number takes the reader straight to the typo.
    """
    from webhook.model import pointer as jp

    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in known]
        if extra:
            return jp.join("", *path, extra[0]), f"unknown field {extra[0]!r}"
    return jp.join("", *path), error.message
