"""Releases that are what they say (issue 24 item 5): one version, in webhook/__init__.py, everywhere it is shown
(`aiadmit --version`, the package metadata, the chart's version and appVersion, the image tag the kustomize base and
the chart deploy, CHANGELOG.md's newest release); the README's wheel install works as written (`python3 -m build`,
then installing the wheel); the pre-commit snippets name a rev that pre-commit accepts once the placeholders are
replaced. `helm package` of the chart is in tests/e2e/test_helm_chart.py (it needs helm)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest
import yaml

import webhook

ROOT = Path(__file__).resolve().parents[1]
VERSION = webhook.__version__


def test_the_version_is_a_release_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION


def test_one_version_everywhere():
    shown = subprocess.run([sys.executable, "-m", "webhook", "--version"], capture_output=True, text=True,
                           timeout=60, cwd=ROOT)
    assert shown.stdout.strip() == f"aiadmit {VERSION}", shown.stdout + shown.stderr
    with open(ROOT / "pyproject.toml", "rb") as handle:
        project = tomllib.load(handle)
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "webhook.__version__"}
    chart = yaml.safe_load((ROOT / "charts" / "aiadmit" / "Chart.yaml").read_text())
    assert (chart["version"], chart["appVersion"]) == (VERSION, VERSION)
    kustomization = yaml.safe_load((ROOT / "manifests" / "base" / "kustomization.yaml").read_text())
    assert kustomization["images"] == [{"name": "ghcr.io/aiadmit/aiadmit", "newTag": VERSION}]
    deployment = yaml.safe_load((ROOT / "manifests" / "base" / "deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"ghcr.io/aiadmit/aiadmit:{VERSION}"
    # the chart's image tag defaults to appVersion (values.yaml leaves it empty)
    assert yaml.safe_load((ROOT / "charts" / "aiadmit" / "values.yaml").read_text())["image"]["tag"] == ""
    # the image's version label is read from the same place
    assert "webhook/__init__.py" in (ROOT / "manifests" / "image" / "build.sh").read_text()


def test_the_installed_metadata_is_the_same_version():
    """The metadata of the install this suite runs from (editable or not) says the same; a stale install after a
    version change fails here rather than shipping a mislabelled wheel."""
    assert importlib.metadata.version("aiadmit") == VERSION


def test_the_changelog_has_the_current_release_first():
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\] - (unreleased|\d{4}-\d{2}-\d{2})$", text, re.M)
    assert releases and releases[0][0] == VERSION, releases  # the version being built is the newest section
    assert all(day != "unreleased" for _, day in releases[1:]), releases  # only the newest may be unreleased
    assert len({v for v, _ in releases}) == len(releases), releases


def test_no_install_command_names_a_package_index_that_does_not_serve_aiadmit():
    """`pip install aiadmit` (from PyPI) was the README's lightest install, and no index serves it."""
    for doc in ("README.md", "docs/cli.md", "docs/operations.md"):
        text = (ROOT / doc).read_text()
        assert not re.search(r"pip install '?aiadmit(\[\w+\])?'?(\s|`|$)", text), doc


def _snippets(text: str) -> list[str]:
    return [block for block in re.findall(r"```yaml\n(.*?)```", text, re.S) if "id: aiadmit-audit" in block and "repo: " in block]


def test_pre_commit_snippets_name_a_rev_and_a_placeholder_to_replace():
    for doc in ("README.md", "docs/cli.md"):
        (snippet,) = _snippets((ROOT / doc).read_text())
        repo = re.search(r"repo: (\S+)", snippet).group(1)
        rev = re.search(r"rev: (\S+)", snippet).group(1)
        assert repo == "https://github.com/YOUR-ORG/aiadmit", (doc, repo)
        assert rev == f"v{VERSION}", (doc, rev)
        assert "commit SHA" in snippet, doc


def test_the_wheel_builds_as_the_readme_says_and_installs(tmp_path):
    """`python3 -m build` (an isolated build: it fetches setuptools from the package index, as it would for a user)
    of exactly what the wheel is made of, then the wheel into a fresh virtualenv: `aiadmit --version` there runs
    the installed copy, with the bundle of built-in policies."""
    try:
        import build  # noqa: F401
    except ImportError:
        pytest.skip("the `build` package is not installed (it is in the test extra: pip install -e '.[test]')")
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m pip install build && python3 -m build" in readme
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("webhook", "policies"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp_path / "dist"), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    wheel = tmp_path / "dist" / f"aiadmit-{VERSION}-py3-none-any.whl"
    assert wheel.is_file() and (tmp_path / "dist" / f"aiadmit-{VERSION}.tar.gz").is_file(), \
        sorted(os.listdir(tmp_path / "dist"))
    # a fresh venv that sees the machine's site-packages for the dependencies, but installs aiadmit from the wheel
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    shown = subprocess.run([str(env_dir / "bin" / "aiadmit"), "--version"], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path, env=clean)
    assert shown.stdout.strip() == f"aiadmit {VERSION}", shown.stderr
    where = subprocess.run([str(python), "-c", "import webhook, sys; print(webhook.__file__)"], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path, env=clean).stdout.strip()
    assert where.startswith(str(env_dir)), where
    listed = subprocess.run([str(env_dir / "bin" / "aiadmit"), "policies"], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path, env=clean)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert all(p.stem in listed.stdout for p in (ROOT / "policies").glob("*.yaml"))
