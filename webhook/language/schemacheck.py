"""JSON Schema checks of the documents aiadmit reads itself (policies, its config), remembered when they pass.

The checks are what make a broken policy or config fail to load with file,
line and field; they always run on a document the command line has not seen
pass before. A document whose exact text passed the exact schema under the
same validator passes again, so the `Checks` handed in (language/checks.py: the
bundle's record, the command line's disk cache) can skip both the check and the
import of `jsonschema` (together 0.075 s of every `aiadmit audit`,
bench/RESULTS.md). The webhook passes no cache: only the record answers there.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Optional

from webhook.language.checks import Checks
from webhook.model import pointer as jp


@lru_cache(maxsize=8)
def validator(schema_file: str) -> Any:
    """The Draft 2020-12 validator of a schema file (jsonschema imported here, on first need)."""
    from jsonschema import Draft202012Validator

    with open(schema_file, encoding="utf-8") as handle:
        return Draft202012Validator(json.load(handle))


@lru_cache(maxsize=8)
def _schema_text(schema_file: str) -> str:
    with open(schema_file, encoding="utf-8") as handle:
        return handle.read()


def errors(schema_file: str, document: Any, text: Optional[str], place: str, checks: Optional[Checks] = None) -> list:
    """The schema errors of `document`, sorted by path; `text` and `place` (its file's text and the document's
    index in it) say exactly which document it is, so `checks` may know that it passed before. Without `text`,
    it is simply checked."""
    checks = checks or Checks()
    if text is not None and checks.schema_passed(_schema_text(schema_file), text, place):
        return []
    found = sorted(validator(schema_file).iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    if not found and text is not None:
        checks.remember_schema(_schema_text(schema_file), text, place)
    return found


def locate_error(error: Any) -> tuple[str, str]:
    """(JSON pointer, message) of a validation error of a document a person wrote.

    An unknown field is reported at the field itself, not at the map that holds it,
    so the line number takes the reader straight to the typo.
    """
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = set(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in known]
        if extra:
            return jp.join("", *path, extra[0]), f"unknown field {extra[0]!r}"
    if error.validator == "enum" and isinstance(error.instance, (int, float)) and not isinstance(error.instance, bool) \
            and all(isinstance(choice, str) for choice in error.validator_value):  # `kubernetesVersion: 1.35`
        return jp.join("", *path), f"{error.message}: YAML read {error.instance!r} as a number; quote it"
    return jp.join("", *path), error.message
