"""Tests and scripts run the product with the interpreter that runs them, never whatever `python3` is on PATH.

`.venv/bin/python -m pytest` without activating the virtualenv must work: a subprocess started as `python3 ...`
gets the system interpreter, which may lack the dependencies (three image tests used to error at set-up so).
"""

from __future__ import annotations

import os
import re

from testdata import ROOT

# A command list or string whose program is a bare python/python3 (a process on this machine, not in an image).
BARE = re.compile(r"""(?:run|Popen|check_output|check_call|call|exec\w*)\(\s*\[?\s*["']python3?(?:\.\d+)?[\s"']""")
# Started inside a node's or an image's own root filesystem, where its python3 is the one meant.
INSIDE = ("tests/e2e/install/nodeharness.py", "tests/e2e/install/dockerbuild.py", "tests/test_interpreter.py")


def _sources():
    for top in ("tests", "bench", "manifests", ".ci"):
        for directory, subdirs, files in os.walk(os.path.join(ROOT, top)):
            subdirs[:] = [d for d in subdirs if d not in ("data", "__pycache__")]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    yield os.path.relpath(path, ROOT), path


def test_no_test_or_script_starts_python_from_path():
    found = []
    for relative, path in _sources():
        if relative in INSIDE:
            continue
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for match in BARE.finditer(text):  # the whole text: a call's list may start on the next line
            number = text.count("\n", 0, match.start()) + 1
            found.append(f"{relative}:{number}: {' '.join(match.group(0).split())}")
    assert not found, "use sys.executable:\n" + "\n".join(found)


def test_the_pattern_finds_what_it_is_for():
    assert BARE.search('subprocess.run(["python3", "-m", "webhook", "certs"])')
    assert BARE.search("subprocess.run(['python', str(OCI_PY)])")
    assert not BARE.search('subprocess.run([sys.executable, "-m", "webhook"])')
    assert BARE.search('subprocess.check_output("python3 -m webhook audit x", shell=True)')
    assert not BARE.search('command=["python3", "-m", "vllm"]')  # a container's command in a manifest
    assert BARE.search('subprocess.run(\n        ["python3", "-m", "webhook", "audit"],\n        check=True)')
