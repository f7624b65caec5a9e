"""Policy files' documents kept by the disk cache (language/parsed.py): the same policies and the same problems,
at the same lines, as reading the YAML; a changed or torn entry is a miss."""

from __future__ import annotations

import os

import pytest

from webhook.app.diskcache import DiskCache
from webhook.language import parsed
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.checks import Checks
from webhook.language.loader import load_all, policy_files
from webhook.language.policy import PolicyLoadError

from objects import GOOD


def entries(directory) -> list[str]:
    return sorted(os.path.join(root, name) for root, _, names in os.walk(directory) for name in names)


def _shape(policies) -> list:
    return [(policy.id, policy.source, policy.document, [(e.source, e.compiled, sorted(e.variables))
                                                         for e in policy.expressions()]) for policy in policies]


def test_the_bundle_read_back_compiles_the_same_policies(tmp_path):
    fresh = _shape(load_all([BUILTIN_POLICY_DIR], checks=Checks())[0])
    cache = DiskCache(str(tmp_path))
    loaded, recalled = parsed.load(policy_files([BUILTIN_POLICY_DIR]), cache)
    assert not recalled and not loaded.errors
    kept = entries(tmp_path / "documents")
    assert len(kept) >= 15  # one per file of Policy documents
    again, recalled = parsed.load(policy_files([BUILTIN_POLICY_DIR]), cache)
    assert recalled and sum(r.origin.node is None for r in again.resources) >= len(kept)  # no YAML read for them
    assert [(r.origin.file, r.origin.document, r.obj) for r in again.resources] == \
        [(r.origin.file, r.origin.document, r.obj) for r in loaded.resources]
    assert _shape(load_all([BUILTIN_POLICY_DIR], checks=Checks(DiskCache(str(tmp_path))))[0]) == fresh
    assert entries(tmp_path / "documents") == kept


def test_a_problem_is_reported_at_its_line_though_the_documents_were_recalled(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD.format(name="good"))
    bad.write_text(GOOD.format(name="bad").replace("action: deny", "action: deny\nseverity: high"))
    paths = [str(good), str(bad)]
    with pytest.raises(PolicyLoadError) as fresh:
        load_all(paths, checks=Checks())
    for _ in range(2):  # the first run keeps both files (YAML that reads), the second recalls them
        with pytest.raises(PolicyLoadError) as raised:
            load_all(paths, checks=Checks(DiskCache(str(tmp_path / "cache"))))
        assert raised.value.problems == fresh.value.problems == [f"{bad}:9:1: severity: unknown field 'severity'"]
    assert len(entries(tmp_path / "cache" / "documents")) == 2


def test_a_changed_file_misses_and_a_torn_entry_is_read_again(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(GOOD.format(name="first"))
    cache = DiskCache(str(tmp_path / "cache"))
    parsed.load([str(policy)], cache)
    [path] = entries(tmp_path / "cache" / "documents")
    policy.write_text(GOOD.format(name="second"))
    loaded, recalled = parsed.load([str(policy)], cache)
    assert not recalled and loaded.resources[0].obj["metadata"]["name"] == "second"
    assert len(entries(tmp_path / "cache" / "documents")) == 2
    policy.write_text(GOOD.format(name="first"))
    data = open(path, "rb").read()
    with open(path, "wb") as handle:
        handle.write(data[:-5] + b"}}}}]")  # the digest no longer matches
    loaded, recalled = parsed.load([str(policy)], cache)
    assert not recalled and loaded.resources[0].origin.node is not None
    assert loaded.resources[0].obj["metadata"]["name"] == "first"
    again, recalled = parsed.load([str(policy)], cache)  # rewritten by the read
    assert recalled and again.resources[0].obj == loaded.resources[0].obj


VAP = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: vap}
spec:
  validations: [{expression: "true"}]
"""


@pytest.mark.parametrize("text", [
    GOOD.format(name="p") + "---\n" + VAP,  # an in-tree policy beside it: its positions may be needed later
    "apiVersion: v1\nkind: List\nitems: [" + "{apiVersion: aiadmit.dev/v1alpha1, kind: Policy}]\n",
    GOOD.format(name="p").replace("action: deny", "action: deny\nratio: .nan"),  # JSON holds no NaN
    "apiVersion: aiadmit.dev/v1alpha1\nkind: Policy\nmetadata: {name: [unclosed\n",  # a YAML error
], ids=["in-tree", "list", "nan", "yaml-error"])
def test_what_a_recalled_document_could_not_stand_for_is_not_kept(tmp_path, text):
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    parsed.load([str(policy)], DiskCache(str(tmp_path / "cache")))
    assert entries(tmp_path / "cache" / "documents") == []
