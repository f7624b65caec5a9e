"""Report formats for audit results. Each module has `render(result, engine, **options) -> str`.

Options a format does not use are ignored, so the command passes them all:
`color` (text), `fail_on` (junit), `max_bytes`/`max_reports` (policyreport).
"""

from __future__ import annotations

from importlib import import_module

FORMATS = {"text": "text", "json": "jsonreport", "sarif": "sarif", "junit": "junit", "policyreport": "policyreport"}


def render(name: str, result, engine, **options) -> str:
    module = import_module(f"{__name__}.{FORMATS[name]}")
    return module.render(result, engine, **options)
