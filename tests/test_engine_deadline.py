"""The engine stops between policies once the caller's deadline has passed."""

import time

import pytest

from webhook.engine.core import BudgetExceeded, Engine
from webhook.model.resource import Resource

GPU_POD = Resource({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
                    "spec": {"containers": [{"name": "c", "image": "i",
                                             "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})


def test_past_deadline_raises_for_evaluate_and_mutate():
    engine = Engine.load()
    with pytest.raises(BudgetExceeded):
        engine.evaluate(GPU_POD, deadline=time.monotonic() - 1)
    with pytest.raises(BudgetExceeded):
        engine.mutate(GPU_POD, deadline=time.monotonic() - 1)


def test_future_deadline_changes_nothing():
    engine = Engine.load()
    later = time.monotonic() + 60
    assert [f.key() for f in engine.evaluate(GPU_POD, deadline=later).findings] == \
        [f.key() for f in engine.evaluate(GPU_POD).findings]
    assert engine.mutate(GPU_POD, deadline=later).operations == engine.mutate(GPU_POD).operations


def test_a_pod_no_policy_applies_to_never_checks_the_clock():
    plain = Resource({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    assert Engine.load().evaluate(plain, deadline=time.monotonic() - 1).findings == []
