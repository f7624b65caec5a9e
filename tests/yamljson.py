"""Kubernetes' own YAML-to-JSON conversion as a test tool: tests/tools/yamljson (a Go build of sigs.k8s.io/yaml
v1.6.0's YAMLToJSON and YAMLToJSONStrict, over go.yaml.in/yaml/v2 v2.4.4: what kubectl and the API server's YAML
path run).

Built by tests/tools/yamljson/build.sh, cached in ~/.cache/aiadmit-e2e/yamljson-<hash> (seconds cold with the
module cache warm; at once warm), bounded by AIADMIT_YAMLJSON_BUILD_TIMEOUT seconds (default 900). Without Go and
without a cached build the fixture skips, saying why. AIADMIT_YAMLJSON=/path uses a prebuilt binary.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BUILD = HERE / "tools" / "yamljson" / "build.sh"
TIMEOUT = float(os.environ.get("AIADMIT_YAMLJSON_BUILD_TIMEOUT", "900"))


class Unavailable(RuntimeError):
    """No tool: the reason says why."""


@functools.lru_cache(maxsize=1)
def binary() -> str:
    if os.environ.get("AIADMIT_YAMLJSON"):
        return os.environ["AIADMIT_YAMLJSON"]
    go = os.environ.get("AIADMIT_E2E_GO") or shutil.which("go")
    if not go and os.access("/usr/local/go/bin/go", os.X_OK):
        go = "/usr/local/go/bin/go"
    env = dict(os.environ, **({"AIADMIT_E2E_GO": go} if go else {}))
    try:
        done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, env=env, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"tests/tools/yamljson/build.sh did not finish within {TIMEOUT:.0f} s "
                          "(AIADMIT_YAMLJSON_BUILD_TIMEOUT)") from None
    if done.returncode == 127:
        raise Unavailable("yamljson is not cached and no Go toolchain builds it (Go on PATH, at /usr/local/go/bin, "
                          "or AIADMIT_E2E_GO; or AIADMIT_YAMLJSON=prebuilt binary)")
    if done.returncode != 0:
        raise Unavailable(f"tests/tools/yamljson/build.sh failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def yamljson():
    """convert([yaml_text, ...]) -> one answer per text: {"json": [every distinct result over 64 conversions],
    "error": "...", "strictJSON": [...], "strictError": "..."} (see tests/tools/yamljson/main.go)."""
    try:
        tool = binary()
    except Unavailable as exc:
        pytest.skip(str(exc))

    def convert(texts: list[str]) -> list[dict]:
        done = subprocess.run([tool], input="".join(json.dumps({"yaml": t}) + "\n" for t in texts),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(answers) == len(texts)
        return answers

    return convert
