"""docs/policies.md is generated from the policy files, and must be current."""

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_policies_md_is_current():
    generated = subprocess.run([sys.executable, "-m", "webhook", "policies", "--markdown"], capture_output=True,
                               text=True, check=True, cwd=ROOT).stdout
    with open(os.path.join(ROOT, "docs", "policies.md"), encoding="utf-8") as handle:
        checked_in = handle.read()
    assert checked_in == generated, "docs/policies.md is stale: run `aiadmit policies --markdown > docs/policies.md`"


def test_every_policy_has_a_section_and_a_summary_row():
    with open(os.path.join(ROOT, "docs", "policies.md"), encoding="utf-8") as handle:
        text = handle.read()
    ids = sorted(name[:-5] for name in os.listdir(os.path.join(ROOT, "policies")) if name.endswith(".yaml"))
    assert len(ids) == 17
    for policy_id in ids:
        assert f"\n## {policy_id}\n" in text and f"[`{policy_id}`](#{policy_id})" in text


def test_every_built_in_rule_and_mutation_says_whether_it_is_exported_and_why_not():
    """Issue 23: docs/policies.md says, for every built-in rule (and mutation), whether `aiadmit export` exports it,
    and the reason where not, as the exporter itself decides it (webhook/outputs/vap.py)."""
    from webhook.engine.core import Engine
    from webhook.k8s.versions import REFERENCE
    from webhook.outputs.vap import export

    with open(os.path.join(ROOT, "docs", "policies.md"), encoding="utf-8") as handle:
        sections = {part.split("\n", 1)[0]: part for part in handle.read().split("\n## ")[1:]}
    engine = Engine.load()
    results = {r.policy.id: r for r in export(engine.policies, engine.config, REFERENCE)}
    checked = 0
    for policy in engine.policies:
        section = sections[policy.id]
        rows = {line.split("|")[1].strip().strip("`"): line.rstrip("|").split("|")[-1].strip()
                for line in section.splitlines() if line.startswith("| `")}
        result = results[policy.id]
        whole = dict(result.left).get("*")
        for name in [r.name for r in policy.rules] + [m.name for m in policy.mutations]:
            said = rows.get(name)
            assert said, (policy.id, name, "no row with an `in the API server` column")
            exported = name in result.rules or name in result.mutations
            assert said.startswith("yes") == exported, (policy.id, name, said)
            if not exported:
                assert said.startswith("no") and len(said) > len("no: "), (policy.id, name, said)
                reason = dict(result.left).get(name) or dict(result.left).get(f"mutation {name}") or whole
                assert reason and reason.split(" (")[0][:40] in said, (policy.id, name, said, reason)
            checked += 1
    assert checked >= 80, checked


def test_every_policy_section_says_how_it_reads_dra_devices_pod_level_resources_and_sidecars():
    """Issue 22: docs/policies.md says, for each policy file in policies/, how it reads DRA devices, pod-level
    resources and native sidecars: the three lines of its "Kubernetes 1.35–1.37 forms", each with something said
    (the text of the policy file's `forms`, so the doc and the file cannot disagree)."""
    import yaml

    with open(os.path.join(ROOT, "docs", "policies.md"), encoding="utf-8") as handle:
        sections = {part.split("\n", 1)[0]: part for part in handle.read().split("\n## ")[1:]}
    files = sorted(name for name in os.listdir(os.path.join(ROOT, "policies")) if name.endswith(".yaml"))
    missing = []
    for name in files:
        with open(os.path.join(ROOT, "policies", name), encoding="utf-8") as handle:
            policy = yaml.safe_load(handle)
        forms = policy.get("forms") or {}
        section = sections.get(policy["metadata"]["name"], "")
        forms_part = section.split("### Kubernetes 1.35–1.37 forms", 1)[1] if "### Kubernetes 1.35–1.37 forms" \
            in section else ""
        for key, label in (("dra", "DRA devices"), ("podLevelResources", "Pod-level resources"),
                           ("sidecars", "Native sidecars")):
            said = " ".join(str(forms.get(key) or "").split())
            if not said or f"- **{label}**: {said}\n" not in forms_part:
                missing.append(f"{name}: {label}")
    assert len(files) == 17 and not missing, missing
