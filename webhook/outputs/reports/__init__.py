"""Report formats for audit results.

Each module has two functions, so that the per-object part of a report can be
made by the process that evaluated the object (the workers of webhook.app.parallel)
and the rest by the one that writes the report:

- `fragment(evaluation, engine, **options)`: everything the report says about
  one evaluation, as plain picklable data (text already encoded);
- `render(result, engine, fragments=None, **options) -> str`: the report, from
  one fragment per evaluation of `result` in its order, made here when not given;
  optionally `pieces(...)` with the same arguments: the same text as a list of
  strings, which `write` writes one by one (see text.py's `_runs`).

Options a format does not use are ignored, so the command passes them all:
`color` (text), `fail_on` (junit), `max_bytes`/`max_reports`/`now` (policyreport, openreports).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Optional

FORMATS = {"text": "text", "json": "jsonreport", "sarif": "sarif", "junit": "junit", "policyreport": "policyreport",
           "html": "html", "openreports": "openreports"}


def _module(name: str):
    return import_module(f"{__name__}.{FORMATS[name]}")


def fragment(name: str, evaluation, engine, **options) -> Any:
    return _module(name).fragment(evaluation, engine, **options)


def render(name: str, result, engine, fragments: Optional[list] = None, **options) -> str:
    return _module(name).render(result, engine, fragments=fragments, **options)


def write(name: str, stream, result, engine, fragments: Optional[list] = None, **options) -> None:
    """`render`'s text written to `stream`, in the pieces a format gives (its `pieces`), else whole."""
    module = _module(name)
    make = getattr(module, "pieces", None)
    for piece in make(result, engine, fragments=fragments, **options) if make else \
            [module.render(result, engine, fragments=fragments, **options)]:
        stream.write(piece)


def fragments_of(make: Callable, result, engine, fragments: Optional[list], options: dict) -> list:
    """The fragments a render was given, or made now in this process by the format's `fragment` (`make`)."""
    if fragments is not None:
        if len(fragments) != len(result.evaluations):
            raise ValueError("one report fragment per evaluation expected")
        return fragments
    return [make(evaluation, engine, **options) for evaluation in result.evaluations]
