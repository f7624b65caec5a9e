"""A copy of the webhook package with one module changed by a comment, run once against a shared disk cache: how
the disk-cache tests show that a changed module makes the cache miss (tests/test_diskcache.py,
tests/test_transcript.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Optional

import webhook
from webhook.language.bundle import BUILTIN_POLICY_DIR


def entries(directory) -> list[str]:
    """Every file under `directory`, sorted."""
    return sorted(os.path.join(root, name) for root, _, names in os.walk(directory) for name in names)


def run_copy(tmp_path, change: Optional[str], command: list[str], kind: str) -> tuple[subprocess.CompletedProcess, int]:
    """(the run, how many entries of `kind` it added to the cache): `command` (arguments after `python3`) run in
    a fresh copy of the package and the built-in policies under `tmp_path`, with `change` (a module path under
    webhook/, or None) given one more comment line, and the cache in `tmp_path / "cache"`."""
    tree = tmp_path / f"tree-{len(list(tmp_path.glob('tree-*')))}"
    shutil.copytree(os.path.dirname(webhook.__file__), tree / "webhook", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(BUILTIN_POLICY_DIR, tree / "policies")
    if change:
        with open(tree / "webhook" / change, "a") as handle:
            handle.write("# changed\n")
    env = dict(os.environ, AIADMIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(tree))
    env.pop("AIADMIT_NO_CACHE", None)
    before = set(entries(tmp_path / "cache"))
    run = subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=300, env=env,
                         cwd=str(tree))
    added = [path for path in set(entries(tmp_path / "cache")) - before if f"{os.sep}{kind}{os.sep}" in path]
    return run, len(added)
