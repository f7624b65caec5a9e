"""Work shared out to forked processes: results in order, large ones whole, a failing slice failing the call."""

import pytest

from webhook.app import parallel


def _squares(bounds):
    return [index * index for index in range(*bounds)]


def _fails_on_seven(bounds):
    if bounds[0] <= 7 < bounds[1]:
        raise ValueError("seven")
    return list(range(*bounds))


def _large(bounds):
    return [("x" * 10_000, index) for index in range(*bounds)]  # megabytes: more than a pipe holds at once


def test_results_come_back_in_order():
    assert parallel.fork_map(None, _squares, 100, 2) == [index * index for index in range(100)]
    big = parallel.fork_map(None, _large, 400, 2)
    assert [index for _, index in big] == list(range(400)) and all(len(text) == 10_000 for text, _ in big)


def test_a_failing_slice_fails_the_call():
    with pytest.raises(ValueError, match="seven"):
        parallel.fork_map(None, _fails_on_seven, 40, 2)
    assert parallel.shared() is None  # nothing of the call is left for the next one
