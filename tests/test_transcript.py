"""A policy document's CEL check answers kept by the disk cache and replayed (language/transcript.py): the same
policies as checking afresh, and a changed, torn or foreign transcript is a miss (then rewritten), never a wrong
answer."""

from __future__ import annotations

import os
import shutil

import pytest

from webhook.app.diskcache import DiskCache
from webhook.language import transcript
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.checks import Checks
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

from objects import GOOD
from packagecopy import entries, run_copy

def _shape(policies) -> list:
    """What the checks decided for every expression of every policy, and what each expression runs."""
    return [(policy.id, [(e.source, e.compiled, sorted(e.variables), e.reference, repr(e.type), sorted(e.named))
                         for e in policy.expressions()]) for policy in policies]


def _load(cache_dir, paths=None) -> tuple[list, dict]:
    """The policies loaded with a disk cache in `cache_dir`, and how many documents were replayed and kept."""
    counts = {"replayed": 0, "kept": 0}
    finished = transcript.Transcribing.finished

    def counting(self):
        finished(self)
        counts["replayed" if self.replaying else "kept"] += 1

    transcript.Transcribing.finished = counting
    # each load here is one that finds no whole bundle kept (language/bundlecache.py): the transcripts answer it
    shutil.rmtree(os.path.join(str(cache_dir), "bundle"), ignore_errors=True)
    try:
        policies = load_policies(paths or [BUILTIN_POLICY_DIR], checks=Checks(DiskCache(str(cache_dir))))
    finally:
        transcript.Transcribing.finished = finished
    return policies, counts


def test_a_second_load_replays_every_document_and_compiles_the_same_policies(tmp_path):
    fresh = _shape(load_policies([BUILTIN_POLICY_DIR], checks=Checks()))
    first, counts = _load(tmp_path)
    assert counts["replayed"] == 0 and counts["kept"] == len(first) > 10
    kept = entries(tmp_path / "transcript")
    assert len(kept) == len(first)
    second, counts = _load(tmp_path)
    assert counts == {"replayed": len(first), "kept": 0}
    assert entries(tmp_path / "transcript") == kept  # nothing rewritten
    assert _shape(first) == _shape(second) == fresh


def test_the_webhook_keeps_and_replays_no_transcript():
    assert transcript.for_document(Checks(), {"kind": "Policy"}, None, None) is None


POLICY = GOOD.format(name="transcribed")


def test_a_changed_document_or_override_misses(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    _load(tmp_path / "cache", [str(policy)])
    [before] = entries(tmp_path / "cache" / "transcript")
    policy.write_text(POLICY.replace("has(container.image)", "has(container.image) && size(container.image) > 0"))
    [changed], counts = _load(tmp_path / "cache", [str(policy)])
    assert counts == {"replayed": 0, "kept": 1}
    assert len(entries(tmp_path / "cache" / "transcript")) == 2 and before in entries(tmp_path / "cache" / "transcript")
    assert "size(container.image) > 0" in changed.rules[0].expression.source
    doc = {"kind": "Policy", "params": {"a": 1}}
    assert transcript.key(doc, None, None) != transcript.key(doc, {"a": 2}, None)


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "foreign", "short", "not-json"])
def test_a_damaged_or_foreign_transcript_is_a_miss_and_the_same_policy_loads(tmp_path, damage):
    policy, other = tmp_path / "policy.yaml", tmp_path / "other.yaml"
    policy.write_text(POLICY)
    other.write_text(POLICY.replace("transcribed", "other").replace("has(container.image)", "has(container.ports)"))
    [expected], _ = _load(tmp_path / "cache", [str(policy)])
    [path] = entries(tmp_path / "cache" / "transcript")
    _load(tmp_path / "foreign", [str(other)])
    [foreign] = entries(tmp_path / "foreign" / "transcript")
    data = open(path, "rb").read()
    cache = DiskCache(str(tmp_path / "cache"))
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data = data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]
    elif damage == "empty":
        data = b""
    elif damage == "foreign":  # a well-formed transcript of another document under this one's key
        data = open(foreign, "rb").read()
    else:  # well-formed entries under the document's own key (a valid digest) that do not fit it
        data = b"[]" if damage == "short" else b"{not json"
        os.remove(path)
        cache.remember_transcript(transcript.key(_doc(policy), None, None), data)
        assert entries(tmp_path / "cache" / "transcript") == [path]
    if damage not in ("short", "not-json"):
        with open(path, "wb") as handle:
            handle.write(data)
    [again], counts = _load(tmp_path / "cache", [str(policy)])
    assert counts == {"replayed": 0, "kept": 1}  # checked afresh, and the transcript written again
    assert _shape([again]) == _shape([expected])
    [third], counts = _load(tmp_path / "cache", [str(policy)])
    assert counts == {"replayed": 1, "kept": 0}
    assert _shape([third]) == _shape([expected])


def _doc(path) -> dict:
    from webhook.inputs.sources import load_paths

    [resource] = load_paths([str(path)], templates=False).resources
    return resource.obj


def test_a_failed_compile_keeps_no_transcript(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.replace("has(container.image)", "has(container.image) && nosuch(1)"))
    with pytest.raises(PolicyLoadError):
        _load(tmp_path / "cache", [str(policy)])
    assert entries(tmp_path / "cache" / "transcript") == []


def test_a_changed_language_module_misses(tmp_path):
    # A copy of the package whose policy compiler differs by a comment: every document is compiled and kept again.
    added = []
    for change in (None, "language/compiler.py"):
        run, count = run_copy(tmp_path, change, ["-c", "from webhook.app.cli import main; main(['policies'])"],
                              "transcript")
        assert run.returncode == 0, run.stderr
        added.append(count)
    assert added[0] == added[1] > 10, added
