"""`aiadmit cel --object FILE` on a file of several objects binds the one asked for (`--document N`, or
`--kind`/`--name`); without a choice it is an error naming them, never silently the first."""

from __future__ import annotations

import os
import subprocess
import sys

from testdata import ROOT

TWO = """\
apiVersion: v1
kind: Pod
metadata: {name: first, namespace: ml}
spec:
  containers: [{name: c, image: r/i:1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: second, namespace: ml}
spec:
  selector: {matchLabels: {app: s}}
  template:
    metadata: {labels: {app: s}}
    spec:
      containers: [{name: c, image: r/i:1}]
"""


def cel(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", "cel", "object.metadata.name", "--level", "object",
                           *args], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})


def test_several_objects_without_a_choice_is_an_error(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(TWO)
    done = cel("--object", str(path))
    assert done.returncode == 2 and not done.stdout
    assert f"{path}:0:0: error: the file holds 2 objects (1: Pod ml/first, 2: Deployment ml/second)" in done.stderr


def test_document_kind_and_name_choose_the_object(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(TWO)
    assert cel("--object", str(path), "--document", "2").stdout.strip() == '"second"'
    assert cel("--object", str(path), "--document", "1").stdout.strip() == '"first"'
    assert cel("--object", str(path), "--kind", "Deployment").stdout.strip() == '"second"'
    assert cel("--object", str(path), "--name", "first").stdout.strip() == '"first"'
    assert cel("--object", str(path), "--document", "3").returncode == 2
    assert cel("--object", str(path), "--kind", "Job").returncode == 2
