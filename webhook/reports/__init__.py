"""Report formats for audit results. Each module has `render(result, engine) -> str`."""

from __future__ import annotations

from importlib import import_module

FORMATS = {"text": "text", "json": "jsonreport"}


def render(name: str, result, engine, **options) -> str:
    module = import_module(f"{__name__}.{FORMATS[name]}")
    return module.render(result, engine, **options)
