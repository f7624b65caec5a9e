"""Every PolicyTest under tests/policies runs through the same runner as `aiadmit test`."""

import os

import pytest

from webhook.app.policytest import find_test_files, run_test_file

HERE = os.path.join(os.path.dirname(__file__), "policies")
FILES = find_test_files([HERE])
ENGINES: dict = {}


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(f, HERE) for f in FILES])
def test_policy_cases(path):
    run = run_test_file(path, ENGINES)
    assert not run.errors, run.errors
    failures = [f"{r.name}: {r.detail}" for r in run.results if not r.ok]
    assert run.results and not failures, "\n".join(failures)


def test_every_builtin_policy_has_cases():
    from webhook.language.bundle import BUILTIN_POLICY_DIR
    from webhook.language.loader import load_policies

    covered = {os.path.basename(os.path.dirname(f)) for f in FILES}
    missing = sorted(p.id for p in load_policies([BUILTIN_POLICY_DIR]) if p.id not in covered)
    assert not missing, f"policies without test cases in tests/policies/<id>/: {missing}"
