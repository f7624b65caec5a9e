"""README.md opens with the two set-up commands (CI and the developers' guide run them), then says what aiadmit is
and shows a 30-second example, before the install tables and the measurements; the example's output is real."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from testdata import ROOT


def _readme() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        return handle.read()


def test_readme_opens_with_the_set_up_commands_then_what_it_is_then_the_rest():
    text = _readme()
    blocks = [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)
              if lang in ("", "sh")]  # every block paired with its own closing fence, then the sh/unlabelled ones
    first = blocks[0].splitlines()
    assert [line.split("&&")[-1].split("#")[0].strip() for line in first] == [
        "aiadmit serve --dev", "python3 -m pytest -q tests"]
    what = text.index("Policy-as-code admission for AI workloads on Kubernetes")
    example = text.index("In 30 seconds")
    assert text.index(blocks[0]) < what < example < text.index("## Install")
    assert example < text.index("How long the two set-up commands take")
    assert example < text.index("The suite needs nothing beside the clone")


def test_the_example_output_is_what_the_audit_prints():
    text = _readme()
    start = text.index("In 30 seconds")
    shown = [line for line in text[start:text.index("## Install")].splitlines()
             if line.startswith("examples/manifests/")]
    assert shown
    done = subprocess.run([sys.executable, "-m", "webhook", "audit", "examples/manifests/pytorchjob-gpu.yaml"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 1
    for line in shown:
        assert line in done.stdout.splitlines(), line
