"""The kinds table read from kinds.json only when it was written from kinds.yaml's exact text (k8s/kindnames.py)."""

from __future__ import annotations

import json
import shutil

import yaml

from webhook.k8s import kindnames


def _yaml_table(path: str = kindnames.KINDS_FILE) -> dict:
    with open(path, "rb") as handle:
        return yaml.load(handle.read(), Loader=yaml.CSafeLoader)


def test_the_committed_json_is_the_yaml_table_in_its_order():
    with open(kindnames.KINDS_JSON, encoding="utf-8") as handle:
        assert handle.read() == kindnames.recorded_text()  # manifests/sync.py rewrites it
    with open(kindnames.KINDS_FILE, "rb") as handle:
        found = kindnames._recorded(handle.read())
    assert found is not None
    assert json.dumps(found) == json.dumps(_yaml_table())  # same values, same key order


def _copy_table(tmp_path, monkeypatch) -> tuple:
    """kinds.yaml and kinds.json copied where the test may change them, and kindnames pointed at the copies."""
    source, recorded = tmp_path / "kinds.yaml", tmp_path / "kinds.json"
    shutil.copy(kindnames.KINDS_FILE, source)
    shutil.copy(kindnames.KINDS_JSON, recorded)
    monkeypatch.setattr(kindnames, "KINDS_FILE", str(source))
    monkeypatch.setattr(kindnames, "KINDS_JSON", str(recorded))
    return source, recorded


def test_an_edited_yaml_is_read_as_yaml_not_from_the_stale_json(tmp_path, monkeypatch):
    source, _ = _copy_table(tmp_path, monkeypatch)
    table = _yaml_table(str(source))
    table["otherKinds"]["example.dev"] = {"closed": True, "kinds": ["Widget"]}
    source.write_text(yaml.safe_dump(table, sort_keys=False))
    found = kindnames.table_data.__wrapped__(str(source))
    assert found["otherKinds"]["example.dev"] == {"closed": True, "kinds": ["Widget"]}
    with open(source, "rb") as handle:
        assert kindnames._recorded(handle.read()) is None


def test_a_torn_or_foreign_json_is_a_miss(tmp_path, monkeypatch):
    source, recorded = _copy_table(tmp_path, monkeypatch)
    text = recorded.read_text()
    with open(source, "rb") as handle:
        raw = handle.read()
    for broken in (text[: len(text) // 2], "[]", json.dumps({"sha256": json.loads(text)["sha256"], "table": []})):
        recorded.write_text(broken)
        assert kindnames._recorded(raw) is None
        assert json.dumps(kindnames.table_data.__wrapped__(str(source))) == json.dumps(_yaml_table(str(source)))
    recorded.unlink()
    assert kindnames._recorded(raw) is None
