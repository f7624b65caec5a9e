"""The checks of the built-in bundle recorded when it was built (policies/checked.json): used for exactly that
bundle, never for anything that differs from it by a byte."""

import os
import subprocess
import sys

import pytest

from webhook.app import bundlerecord
from webhook.language import record as bundlecheck
from webhook.language.bundle import RECORD_FILE
from webhook.engine.core import Engine
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

PROBE = ("import sys; from webhook.engine.core import Engine; Engine.load({paths}); "
         "print(sorted(m for m in ('jsonschema', 'cel.cel') if m in sys.modules))")


def loads_checkers(paths=None) -> list:
    """Which checkers a fresh process imports to load the bundle (or `paths`), without any disk cache."""
    env = dict(os.environ, AIADMIT_NO_CACHE="1")
    run = subprocess.run([sys.executable, "-c", PROBE.format(paths=repr(paths))], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return eval(run.stdout.strip().splitlines()[-1])  # a list literal the probe printed


def test_the_record_is_what_the_bundle_gives_now():
    with open(RECORD_FILE, encoding="utf-8") as handle:
        assert handle.read() == bundlerecord.text(bundlerecord.compute()), "run python3 manifests/sync.py"


def test_the_unchanged_bundle_loads_without_either_checker():
    assert loads_checkers() == []


def test_a_copy_changed_by_one_byte_is_checked_again(tmp_path):
    changed = tmp_path / "shm-sized.yaml"
    changed.write_text(open(os.path.join(BUILTIN_POLICY_DIR, "shm-sized.yaml"), encoding="utf-8").read() + "\n")
    # the document is checked against the schema again; its CEL is checked by aiadmit's own checker, which never
    # needs the reference library (Rust) at load
    assert loads_checkers([str(changed)]) == ["jsonschema"]
    changed.write_text(changed.read_text().replace("v.name == params.volumeName", "params.volumeName == v.name"))
    assert loads_checkers([str(changed)]) == ["jsonschema"]


def test_an_edited_bundle_policy_still_fails_with_file_line_and_field(tmp_path):
    text = open(os.path.join(BUILTIN_POLICY_DIR, "shm-sized.yaml"), encoding="utf-8").read()
    edited = tmp_path / "shm-sized.yaml"
    edited.write_text(text.replace("params:\n", "severity: high\nparams:\n", 1))
    line = edited.read_text().splitlines().index("severity: high") + 1
    with pytest.raises(PolicyLoadError) as raised:
        load_policies([str(edited)])
    assert raised.value.problems == [f"{edited}:{line}:1: severity: unknown field 'severity'"]


def test_a_changed_param_is_checked_as_declared_constant(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\n"
                      "policies:\n  shm-sized:\n    params: {volumeName: shared-memory}\n")
    engine = Engine.load(config_path=str(config))
    policy = engine.by_id["shm-sized"]
    shm = [e for rule in policy.rules for e in (rule.when, rule.expression) if e is not None]
    shm += [e for mutation in policy.mutations for e in (mutation.when, mutation.value) if e is not None]
    touched = [e for e in shm if "shared-memory" in e.compiled]
    assert touched and all("params.volumeName" in e.source for e in touched)  # checked as written, run folded


def test_a_missing_or_broken_record_means_every_check_runs(tmp_path, monkeypatch):
    for content in (None, "{not json", '{"passed": 3}'):
        record = tmp_path / "checked.json"
        if content is not None:
            record.write_text(content)
        monkeypatch.setattr(bundlecheck, "RECORD_FILE", str(record))
        bundlecheck._record.cache_clear()
        try:
            policies = load_policies([BUILTIN_POLICY_DIR])
            assert len(policies) == 17
        finally:
            bundlecheck._record.cache_clear()
