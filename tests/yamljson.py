"""Kubernetes' own YAML-to-JSON conversion as a test tool: tests/tools/yamljson (a Go build of sigs.k8s.io/yaml
v1.6.0's YAMLToJSON and YAMLToJSONStrict, over go.yaml.in/yaml/v2 v2.4.4: what kubectl and the API server's YAML
path run).

Built by tests/tools/yamljson/build.sh (tests/tools/gotool.sh) and located by tests/gotools.py, cached in
~/.cache/aiadmit-e2e/yamljson-<hash> (seconds cold with the module cache warm; at once warm), bounded by
AIADMIT_YAMLJSON_BUILD_TIMEOUT seconds (default 900). Without Go and without a cached build the fixture skips,
saying why. AIADMIT_YAMLJSON=/path uses a prebuilt binary.
"""

from __future__ import annotations

import functools
import json
import subprocess

import pytest

from gotools import TOOLS, Unavailable, locate


@functools.lru_cache(maxsize=1)
def binary() -> str:
    return locate(TOOLS / "yamljson", "AIADMIT_YAMLJSON", "AIADMIT_YAMLJSON_BUILD_TIMEOUT")


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


def aiadmit_reads(text: str, filename: str) -> tuple[object, str]:
    """(the `data` map of the one document as aiadmit's reader makes it, or None; the first input error as
    `file:line:col: message`, or ""): the side the tests hold against the tool's answer."""
    from webhook.inputs.sources import load_text

    loaded = load_text(text, filename)
    if loaded.errors:
        error = loaded.errors[0]
        return None, f"{error.file}:{error.line}:{error.column}: {error.message}"
    (resource,) = loaded.resources
    return resource.obj["data"], ""
