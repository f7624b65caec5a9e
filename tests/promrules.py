"""Prometheus's own rule-file check as a test tool: tests/tools/promrules (a Go build of github.com/prometheus/
prometheus v0.316.0's rulefmt.Parse, the function `promtool check rules` calls, and its PromQL parser).

Why not promtool itself: `go install .../cmd/promtool` compiles every service-discovery plugin of Prometheus (the
cloud SDKs); the tool calls the same parser and validation with a fraction of the build. tests/tools/promrules/
build.sh builds it (tests/tools/gotool.sh), tests/gotools.py locates it; the build is cached in
~/.cache/aiadmit-e2e/promrules-<hash> (22 s cold here, module downloads cached; at once warm) and bounded by
AIADMIT_PROMRULES_BUILD_TIMEOUT seconds (default 900). Without Go and without a cached build, the fixture skips,
saying why. AIADMIT_PROMRULES=/path uses a prebuilt binary.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from gotools import TOOLS, Unavailable, locate


@functools.lru_cache(maxsize=1)
def binary() -> str:
    return locate(TOOLS / "promrules", "AIADMIT_PROMRULES", "AIADMIT_PROMRULES_BUILD_TIMEOUT")


@pytest.fixture(scope="session")
def promrules():
    """check(groups_document, tmp_dir) -> the tool's answer for one rule file: {"errors": [...], "rules": [...]}."""
    try:
        tool = binary()
    except Unavailable as exc:
        pytest.skip(str(exc))

    def check(groups: dict, directory: Path) -> dict:
        path = Path(directory) / "rules.yaml"
        path.write_text(yaml.safe_dump(groups, sort_keys=False))
        done = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        (answer,) = json.loads(done.stdout)["files"]
        return answer

    return check
