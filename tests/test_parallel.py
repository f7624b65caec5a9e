"""Work shared out to forked processes: results in order, through files that do not outlive the call."""

import tempfile

import pytest

from webhook.app import parallel as forked


def _squares(bounds):
    return [index * index for index in range(*bounds)]


def _fails_on_seven(bounds):
    if bounds[0] <= 7 < bounds[1]:
        raise ValueError("seven")
    return list(range(*bounds))


def _large(bounds):
    return [("x" * 10_000, index) for index in range(*bounds)]  # megabytes: more than a pipe holds at once


@pytest.fixture
def spool(tmp_path, monkeypatch):
    monkeypatch.setattr(forked, "_spool_directory", lambda: tempfile.mkdtemp(dir=tmp_path))
    return tmp_path


def test_results_come_back_in_order_and_the_spool_is_removed(spool):
    assert forked.fork_map(None, _squares, 100, 2) == [index * index for index in range(100)]
    big = forked.fork_map(None, _large, 400, 2)
    assert [index for _, index in big] == list(range(400)) and all(len(text) == 10_000 for text, _ in big)
    assert list(spool.iterdir()) == []


def test_a_failing_slice_fails_the_call_and_still_removes_the_spool(spool):
    with pytest.raises(ValueError, match="seven"):
        forked.fork_map(None, _fails_on_seven, 40, 2)
    assert list(spool.iterdir()) == []
