"""The CEL extension module, without the `cel` package's command-line tool.

`import cel` runs the package's `__init__`, which imports its interactive CLI
(prompt_toolkit, rich, typer): 170 ms of start-up for every `aiadmit` run, and
pre-commit starts aiadmit once per batch of files. The compiled extension is
all the engine uses, so it is loaded on its own; if the package's layout ever
changes, the plain import still works.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _load():
    if "cel.cel" in sys.modules:
        return sys.modules["cel.cel"]
    spec = importlib.util.find_spec("cel")
    if spec is None or not spec.origin:
        raise ImportError("the common-expression-language package is not installed")
    directory = os.path.dirname(spec.origin)
    for name in os.listdir(directory):
        if name.startswith("cel.") and name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            loader = importlib.machinery.ExtensionFileLoader("cel.cel", os.path.join(directory, name))
            module = importlib.util.module_from_spec(importlib.util.spec_from_loader("cel.cel", loader))
            loader.exec_module(module)
            sys.modules["cel.cel"] = module
            return module
    import cel as package  # pragma: no cover - a layout without a separate extension file
    return package


cel = _load()
