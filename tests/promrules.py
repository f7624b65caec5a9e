"""Prometheus's own rule-file check as a test tool: tests/tools/promrules (a Go build of github.com/prometheus/
prometheus v0.316.0's rulefmt.Parse, the function `promtool check rules` calls, and its PromQL parser).

Why not promtool itself: `go install .../cmd/promtool` compiles every service-discovery plugin of Prometheus (the
cloud SDKs); the tool calls the same parser and validation with a fraction of the build. The build is cached in
~/.cache/aiadmit-e2e/promrules-<hash> (22 s cold here, module downloads cached; at once warm) and bounded by
AIADMIT_PROMRULES_BUILD_TIMEOUT seconds (default 900). Without Go and without a cached build, the fixture skips,
saying why. AIADMIT_PROMRULES=/path uses a prebuilt binary.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
BUILD = HERE / "tools" / "promrules" / "build.sh"
TIMEOUT = float(os.environ.get("AIADMIT_PROMRULES_BUILD_TIMEOUT", "900"))


class Unavailable(RuntimeError):
    """No tool: the reason says why."""


@functools.lru_cache(maxsize=1)
def binary() -> str:
    if os.environ.get("AIADMIT_PROMRULES"):
        return os.environ["AIADMIT_PROMRULES"]
    go = os.environ.get("AIADMIT_E2E_GO") or shutil.which("go")
    if not go and os.access("/usr/local/go/bin/go", os.X_OK):
        go = "/usr/local/go/bin/go"
    env = dict(os.environ, **({"AIADMIT_E2E_GO": go} if go else {}))
    try:
        done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, env=env, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"tests/tools/promrules/build.sh did not finish within {TIMEOUT:.0f} s "
                          "(AIADMIT_PROMRULES_BUILD_TIMEOUT)") from None
    if done.returncode == 127:
        raise Unavailable("promrules is not cached and no Go toolchain builds it (Go on PATH, at /usr/local/go/bin, "
                          "or AIADMIT_E2E_GO; or AIADMIT_PROMRULES=prebuilt binary)")
    if done.returncode != 0:
        raise Unavailable(f"tests/tools/promrules/build.sh failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


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
