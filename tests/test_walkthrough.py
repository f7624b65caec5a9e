"""docs/policy-language.md's walkthrough, replayed as written: the policy file it shows, the commands with the exit
codes their comments give, the edit to the scaffolded resources, each mistake of the table with the first line
aiadmit prints for it, and the commit through the real pre-commit hooks (installed from this checkout)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from precommitrepo import git, snapshot
from testdata import ROOT

DOC = os.path.join(ROOT, "docs", "policy-language.md")


def _section() -> str:
    with open(DOC, encoding="utf-8") as handle:
        text = handle.read()
    start = text.index("## Walkthrough: a policy of your own")
    end = text.find("\n## ", start + 3)
    return text[start:end if end >= 0 else len(text)]


def _steps(section: str) -> list[tuple[str, str]]:
    """("yaml"|"sh"|"table", body) in the order written."""
    found = []
    for match in re.finditer(r"^```(yaml|sh)\n(.*?)^```|^(\| in \|.*?)(?=\n\n)", section, flags=re.M | re.S):
        if match.group(1):
            found.append((match.group(1), match.group(2)))
        else:
            found.append(("table", match.group(3)))
    return found


def _run(command: str, cwd, env) -> subprocess.CompletedProcess:
    line = command.replace("aiadmit ", f"{shlex.quote(sys.executable)} -m webhook ")
    return subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=900, env=env)


def _write_block(body: str, work, source: str, sha: str) -> None:
    header, _, _ = body.partition("\n")
    target = header.lstrip("# ").strip()
    named = re.match(r"^(\S+), document (\d+): (\w+)$", target)
    if named:  # an edit: that key of the Nth document of the file becomes what the block shows
        path, number, key = work / named.group(1), int(named.group(2)), named.group(3)
        documents = list(yaml.safe_load_all(path.read_text()))
        documents[number - 1][key] = yaml.safe_load(body)[key]
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        return
    if target == ".pre-commit-config.yaml":
        body = body.replace("<this repository's URL>", source).replace("<tag or commit>", sha)
    (work / target).parent.mkdir(parents=True, exist_ok=True)
    (work / target).write_text(body)


def _mistakes(table: str) -> list[tuple[str, str, str, str]]:
    rows = []
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        where, change, says = cells
        before, after = re.fullmatch(r"`(.*)` → `(.*)`", change).groups()
        rows.append((where, before, after, says.strip("`")))
    return rows


def test_the_walkthrough_runs_as_written(tmp_path):
    if shutil.which("pre-commit") is None:
        pytest.fail("pre-commit is not installed (it is a test dependency: pip install -e '.[test]')")
    work = tmp_path / "repo"
    work.mkdir()
    source, sha = snapshot(tmp_path)
    env = dict(os.environ, PYTHONPATH=ROOT, PRE_COMMIT_HOME=str(tmp_path / "cache"), PRE_COMMIT_COLOR="never",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com")
    git("init", "-q", cwd=work)
    steps = _steps(_section())
    assert [kind for kind, _ in steps] == ["yaml", "sh", "yaml", "sh", "table", "yaml", "sh"], steps
    for kind, body in steps:
        if kind == "yaml":
            _write_block(body, work, source, sha)
        elif kind == "sh":
            for line in body.splitlines():
                command, _, comment = line.partition("   # exit ")
                done = _run(command.strip(), work, env)
                assert done.returncode == int(comment), f"{command}: {done.returncode}\n{done.stdout}{done.stderr}"
                assert "Traceback" not in done.stderr
        else:
            mistakes = _mistakes(body)
            assert len(mistakes) >= 5
            for where, before, after, says in mistakes:
                path = work / where
                text = path.read_text()
                assert before in text, (where, before)
                path.write_text(text.replace(before, after, 1))
                done = _run("aiadmit test my-policies/tests", work, env)
                path.write_text(text)
                assert done.returncode == 2, (after, done.stdout, done.stderr)
                assert done.stderr.splitlines()[0] == says, (after, done.stderr)
                assert len(done.stderr.splitlines()) == 1, f"one mistake, one error: {done.stderr}"
            assert _run("aiadmit test my-policies/tests", work, env).returncode == 0
    # and the fixtures the exclude leaves out would have blocked that commit
    config = (work / ".pre-commit-config.yaml").read_text()
    (work / ".pre-commit-config.yaml").write_text("\n".join(line for line in config.splitlines()
                                                            if "exclude:" not in line) + "\n")
    blocked = subprocess.run(["pre-commit", "run", "aiadmit-audit", "--all-files"], cwd=work, env=env,
                             capture_output=True, text=True, timeout=900)
    assert blocked.returncode == 1 and "team-label-fails" in blocked.stdout, blocked.stdout + blocked.stderr
