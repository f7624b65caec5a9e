"""The command line works without the server stack, as `pip install aiadmit` (no extras) installs it.

Each command runs in a process where the webhook extra's modules cannot be imported (`sys.modules[name] = None`,
which makes both `import` and `importlib.util.find_spec` see them as absent): audit, fix, policies and test must
work; serve, certs and audit --cluster must say which extra to install, never show a traceback. pyproject's core
dependencies must not list them either (bench/install.sh measures what each install costs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import pytest

from testdata import CORPUS, ROOT

SERVER_STACK = ("flask", "gunicorn", "gevent", "prometheus_client", "cryptography", "kubernetes", "werkzeug")
BOOT = ("import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n"
        "sys.argv = ['aiadmit', *{argv!r}]\nfrom webhook.app.cli import entry\nentry()\n")


def light(*argv: str, cwd=None) -> subprocess.CompletedProcess:
    code = BOOT.format(blocked=SERVER_STACK, argv=list(argv))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": ROOT})


def test_core_dependencies_leave_the_server_stack_to_extras():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)["project"]
    core = " ".join(project["dependencies"]).lower()
    for name in ("flask", "gunicorn", "gevent", "prometheus", "cryptography", "kubernetes"):
        assert name not in core, f"{name} is a core dependency"
    extras = project["optional-dependencies"]
    assert "aiadmit[webhook]" in extras["test"], "the README's test install must pull the server too"
    assert {"flask>=3.0", "gunicorn>=27", "gevent>=24.10.1"} <= set(extras["webhook"])
    assert extras["cluster"] == ["kubernetes>=29"]


@pytest.mark.parametrize("argv, code", [
    (("audit", os.path.join(CORPUS, "NVIDIA__gpu-operator")), 1),
    (("audit", "-f", "sarif", os.path.join(CORPUS, "NVIDIA__gpu-operator")), 1),
    (("audit", "-f", "html", os.path.join(CORPUS, "NVIDIA__gpu-operator")), 1),
    (("policies",), 0),
    (("policies", "shm-sized"), 0),
    (("test", os.path.join(ROOT, "tests", "policies", "shm-sized")), 0),
    (("fix", "--check", os.path.join(ROOT, "examples", "manifests")), 1),
])
def test_the_command_line_runs_without_the_server_stack(argv, code):
    done = light(*argv)
    assert done.returncode == code, done.stderr[-3000:]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("argv, extra", [
    (("serve", "--dev"), "webhook"),
    (("certs", "generate", "--out", "certs-here", "--host", "localhost"), "webhook"),
    (("audit", "--cluster", "-A"), "cluster"),
])
def test_commands_that_need_an_extra_say_which(argv, extra, tmp_path):
    done = light(*argv, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"pip install 'aiadmit[{extra}]'" in done.stderr
    assert not list(tmp_path.iterdir()), "nothing written before saying so"
