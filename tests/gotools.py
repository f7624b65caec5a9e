"""Locating the small Go test tools of tests/tools (yamljson, promrules): a prebuilt binary named by an environment
variable, else the tool's build.sh (tests/tools/gotool.sh underneath), bounded in time.

One place, so that every such tool finds Go, bounds its build and says why it is missing the same way: the reason
of Unavailable is what the tests that need the tool skip with.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

TOOLS = Path(__file__).resolve().parent / "tools"


class Unavailable(RuntimeError):
    """No tool: the reason says why."""


def go() -> Optional[str]:
    """The Go toolchain a build.sh is handed (k8scel.py's too): AIADMIT_E2E_GO, else `go` on PATH, else
    /usr/local/go/bin/go."""
    found = os.environ.get("AIADMIT_E2E_GO") or shutil.which("go")
    if not found and os.access("/usr/local/go/bin/go", os.X_OK):
        found = "/usr/local/go/bin/go"
    return found


def locate(tool_dir: Path, env_override: str, timeout_env: str) -> str:
    """The path of the tool built from `tool_dir` (tests/tools/NAME): $env_override when set, else what
    NAME/build.sh prints last, built if not cached within $timeout_env seconds (default 900)."""
    if os.environ.get(env_override):
        return os.environ[env_override]
    name = Path(tool_dir).name
    build = f"tests/tools/{name}/build.sh"
    timeout = float(os.environ.get(timeout_env, "900"))
    toolchain = go()
    env = dict(os.environ, **({"AIADMIT_E2E_GO": toolchain} if toolchain else {}))
    try:
        done = subprocess.run(["bash", str(Path(tool_dir) / "build.sh")], capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{build} did not finish within {timeout:.0f} s ({timeout_env})") from None
    if done.returncode == 127:
        raise Unavailable(f"{name} is not cached and no Go toolchain builds it (Go on PATH, at /usr/local/go/bin, "
                          f"or AIADMIT_E2E_GO; or {env_override}=prebuilt binary)")
    if done.returncode != 0:
        raise Unavailable(f"{build} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]
