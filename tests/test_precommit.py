"""The pre-commit hooks, installed from this checkout by the real `pre-commit` tool into a throwaway repository.

pre-commit clones this repository at a commit and pip-installs it into its own
virtualenv, exactly as a user's `.pre-commit-config.yaml` would. The commit
used is a snapshot of this checkout's working tree (tracked and new files), so
the test checks the code under test, not the last commit.
"""

import os
import re
import shutil
import subprocess
import time

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
from testdata import CORPUS  # tests/data/corpus, in the repository
from precommitrepo import git, snapshot

BAD = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
spec:
  containers:
    - name: main
      image: registry.example/train:v1
      resources:
        limits:
          nvidia.com/gpu: 1
"""

GOOD = """\
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: ml
spec:
  ports: [{port: 80}]
"""

HELM_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "chart.fullname" . }}
  labels:
    {{- include "chart.labels" . | nindent 4 }}
"""


@pytest.fixture(scope="module")
def hooked_repo(tmp_path_factory):
    if shutil.which("pre-commit") is None:
        pytest.fail("pre-commit is not installed (it is a test dependency: pip install -e '.[test]')")
    tmp_path = tmp_path_factory.mktemp("precommit")
    source, sha = snapshot(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"), PRE_COMMIT_COLOR="never")
    git("init", "-q", cwd=work)
    git("config", "user.name", "t", cwd=work)
    git("config", "user.email", "t@example.com", cwd=work)
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {source}\n    rev: {sha}\n    hooks:\n      - id: aiadmit-fix\n      - id: aiadmit-audit\n")
    subprocess.run(["pre-commit", "install"], cwd=work, env=env, check=True, capture_output=True, timeout=120)
    started = time.monotonic()
    installed = subprocess.run(["pre-commit", "install-hooks"], cwd=work, env=env, capture_output=True, text=True,
                               timeout=900)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    print(f"pre-commit install-hooks took {time.monotonic() - started:.1f}s")
    git("add", ".pre-commit-config.yaml", cwd=work)
    committed = git("commit", "-q", "-m", "config", cwd=work, env=env, check=False)
    assert committed.returncode == 0, committed.stdout + committed.stderr
    return work, env


def test_bad_manifest_is_rejected_with_file_and_line_and_good_one_accepted(hooked_repo):
    work, env = hooked_repo
    (work / "deploy").mkdir(exist_ok=True)
    (work / "deploy" / "pod.yaml").write_text(BAD)
    git("add", "deploy/pod.yaml", cwd=work)
    rejected = git("commit", "-m", "bad", cwd=work, check=False, env=env)
    output = rejected.stdout + rejected.stderr
    assert rejected.returncode != 0, output
    assert "aiadmit audit" in output and "Failed" in output
    assert "deploy/pod.yaml:10:7: resources-declared [deny]" in output, output
    # aiadmit-fix wrote the shm volume the webhook would add (pre-commit fails a hook that modifies files)
    assert "aiadmit fix" in output and "files were modified by this hook" in output
    assert "mountPath: /dev/shm" in (work / "deploy" / "pod.yaml").read_text()
    assert git("rev-list", "--count", "HEAD", cwd=work).stdout.strip() == "1"

    git("rm", "-q", "-f", "--cached", "deploy/pod.yaml", cwd=work)
    (work / "deploy" / "pod.yaml").unlink()
    (work / "deploy" / "service.yaml").write_text(GOOD)
    (work / "chart" / "templates").mkdir(parents=True)
    (work / "chart" / "templates" / "deployment.yaml").write_text(HELM_TEMPLATE)
    (work / "values.yaml").write_text("replicas: 2\nimage: {repository: nginx}\n")
    git("add", "deploy/service.yaml", "chart", "values.yaml", cwd=work)
    accepted = git("commit", "-m", "good", cwd=work, check=False, env=env)
    output = accepted.stdout + accepted.stderr
    assert accepted.returncode == 0, output
    assert "aiadmit audit" in output and "Passed" in output and "Failed" not in output
    assert git("rev-list", "--count", "HEAD", cwd=work).stdout.strip() == "2"


def test_a_thousand_manifests_in_one_run(hooked_repo):
    """`pre-commit run --all-files` over 1,000+ corpus manifests: every file passed, the run stays fast."""
    work, env = hooked_repo
    bulk = work / "bulk"
    sources = sorted(p for p in os.listdir(CORPUS) if os.path.isdir(os.path.join(CORPUS, p)) and p[0] != "_")
    count = 0
    copy = 0
    while count < 1000:
        for name in sources:
            for root, _, files in os.walk(os.path.join(CORPUS, name)):
                for file in files:
                    if file.endswith((".yaml", ".yml")):
                        target = bulk / f"copy{copy}" / name
                        target.mkdir(parents=True, exist_ok=True)
                        shutil.copy(os.path.join(root, file), target / file)
                        count += 1
        copy += 1
    git("add", "bulk", cwd=work)
    started = time.monotonic()
    run = subprocess.run(["pre-commit", "run", "aiadmit-audit", "--files",
                          *git("diff", "--cached", "--name-only", cwd=work).stdout.split()],
                         cwd=work, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - started
    print(f"aiadmit-audit over {count} manifests: {elapsed:.1f}s")
    assert run.returncode == 1  # the corpus has deny-level findings
    assert "bulk/copy0/NVIDIA__gpu-operator/tests__gpu-pod.yaml:" in run.stdout
    assert "Traceback" not in run.stdout + run.stderr
    assert elapsed < 120, f"{count} manifests took {elapsed:.1f}s"


def test_warnings_are_shown_when_the_hook_passes(hooked_repo):
    """pre-commit hides a passing hook's output unless the hook is `verbose`: warn-level findings must be seen."""
    work, env = hooked_repo
    with open(os.path.join(REPO, "examples", "manifests", "pytorchjob-gpu-compliant.yaml"), encoding="utf-8") as f:
        compliant = f.read()
    (work / "jobs").mkdir(exist_ok=True)
    (work / "jobs" / "train.yaml").write_text(re.sub(r"@sha256:[0-9a-f]{64}", "", compliant))  # a tag: warn only
    run = subprocess.run(["pre-commit", "run", "aiadmit-audit", "--files", "jobs/train.yaml"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout and "Failed" not in run.stdout
    assert "jobs/train.yaml:19:13: image-digest [warn]" in run.stdout, run.stdout


def test_the_documented_exclude_keeps_policy_test_fixtures_out_of_both_hooks(hooked_repo):
    """docs/cli.md's `exclude:` lines, as written there: a PolicyTest fixture that fails on purpose does not block
    the commit, and the same file elsewhere does."""
    work, env = hooked_repo
    with open(os.path.join(REPO, "docs", "cli.md"), encoding="utf-8") as handle:
        blocks = re.findall(r"^```yaml\n(.*?)^```", handle.read(), flags=re.M | re.S)
    (hooks,) = [block for block in blocks if "exclude:" in block]
    config = work / ".pre-commit-config.yaml"
    before = config.read_text()
    fixture = work / "tests" / "policies" / "team-label" / "resources.yaml"
    fixture.parent.mkdir(parents=True, exist_ok=True)
    fixture.write_text(BAD)
    (work / "manifests").mkdir(exist_ok=True)
    (work / "manifests" / "trainer.yaml").write_text(BAD)
    try:
        config.write_text(before[:before.index("    hooks:\n")] + "    hooks:\n" + hooks)
        for hook in ("aiadmit-audit", "aiadmit-fix"):
            run = subprocess.run(["pre-commit", "run", hook, "--files", "tests/policies/team-label/resources.yaml"],
                                 cwd=work, env=env, capture_output=True, text=True, timeout=600)
            assert run.returncode == 0 and "no files to check" in run.stdout, run.stdout + run.stderr
            assert fixture.read_text() == BAD  # fix left it alone too
        run = subprocess.run(["pre-commit", "run", "aiadmit-audit", "--files", "manifests/trainer.yaml"], cwd=work,
                             env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 1 and "manifests/trainer.yaml:" in run.stdout, run.stdout + run.stderr
    finally:
        config.write_text(before)
