"""Each built-in policy says how it reads the forms Kubernetes 1.35-1.37 added (issue 22: pod-level resources,
native sidecars, image volumes; DRA devices are tests/test_dra.py's), and docs/policies.md says it too."""

from __future__ import annotations

import os

import pytest

from webhook.app.commands.policies import FORMS, markdown
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = load_policies([BUILTIN_POLICY_DIR])


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.id)
def test_every_policy_says_how_it_reads_pod_level_resources_sidecars_and_image_volumes(policy):
    forms = policy.document.get("forms") or {}
    missing = {"podLevelResources", "sidecars", "imageVolumes"} - set(forms)
    assert not missing, f"{policy.id}: forms must say {sorted(missing)}"


def test_docs_policies_md_gives_each_policy_its_forms():
    text = markdown(sorted(POLICIES, key=lambda p: p.id))
    with open(os.path.join(ROOT, "docs", "policies.md"), encoding="utf-8") as handle:
        assert handle.read() == text, "docs/policies.md is stale: aiadmit policies --markdown > docs/policies.md"
    for policy in POLICIES:
        section = text.split(f"\n## {policy.id}\n", 1)[1].split("\n## ", 1)[0]
        assert "### Kubernetes 1.35–1.37 forms" in section, policy.id
        for key, label in FORMS.items():
            if key in policy.document["forms"]:
                assert f"- **{label}**: " in section, (policy.id, key)


def test_an_unknown_form_does_not_load(tmp_path):
    with open(os.path.join(BUILTIN_POLICY_DIR, "startup-budget.yaml"), encoding="utf-8") as handle:
        source = handle.read()
    (tmp_path / "startup-budget.yaml").write_text(source.replace("forms:\n", "forms:\n  sidecar: misspelt\n", 1))
    with pytest.raises(PolicyLoadError) as failed:
        load_policies([str(tmp_path)])
    assert "startup-budget.yaml:" in str(failed.value) and "forms" in str(failed.value)
