"""This checkout as a repository pre-commit can install hooks from (used by the pre-commit tests).

pre-commit clones a repository at a commit and pip-installs it into its own virtualenv, exactly as a user's
`.pre-commit-config.yaml` makes it. The commit is a snapshot of this checkout's working tree (tracked and new
files), so the tests check the code under test, not the last commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess

REPO = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))


def git(*args, cwd, check=True, env=None):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=check, timeout=120,
                          env=env)


def snapshot(tmp_path) -> tuple[str, str]:
    """This checkout's working tree as a commit in a scratch clone: (path, sha) pre-commit can install from."""
    snap = tmp_path / "aiadmit-snapshot"
    files = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO).stdout.split("\0")
    for name in filter(None, files):
        source = os.path.join(REPO, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(snap / name), exist_ok=True)
            shutil.copy2(source, snap / name)
    git("init", "-q", cwd=snap)
    git("add", "-A", cwd=snap)
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "snapshot", cwd=snap)
    return str(snap), git("rev-parse", "HEAD", cwd=snap).stdout.strip()
