"""Engine.evaluate binds the rules' variables in a plain dict (engine/core.py: a dict subclass made every generated
read of it slower), which the policies' named `variables` hold strongly (cel/values.py): the evaluation takes them
out when it ends, so no evaluated resource is left to the cyclic collector, however the evaluation ends."""

import copy
import gc

import pytest

from webhook.cel.values import Variables
from webhook.engine.core import BudgetExceeded, Engine
from webhook.model.resource import Resource

JOB = {
    "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
    "metadata": {"name": "ddp", "namespace": "research"},
    "spec": {"pytorchReplicaSpecs": {
        role: {"replicas": 1, "template": {"spec": {"containers": [{
            "name": "pytorch", "image": "registry.example/train:v3",
            "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}
        for role in ("Master", "Worker")}},
}


@pytest.fixture(scope="module")
def engine():
    engine = Engine.load()
    engine.evaluate(Resource(copy.deepcopy(JOB)))  # compiles what it runs: nothing below is a first run
    return engine


def _left_to_the_collector(run) -> list:
    """The Variables objects that only the cyclic collector would free after `run()`."""
    was = gc.isenabled()
    gc.disable()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return [found for found in gc.garbage if type(found) is Variables]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()


def test_an_evaluation_leaves_no_cycle_through_its_variables(engine):
    evaluation = engine.evaluate(Resource(copy.deepcopy(JOB)))
    assert any(f.policy == "shm-sized" for f in evaluation.findings)  # rules with named variables ran
    assert _left_to_the_collector(lambda: engine.evaluate(Resource(copy.deepcopy(JOB)))) == []


def test_an_evaluation_stopped_by_its_deadline_leaves_none_either(engine, monkeypatch):
    from webhook.engine import running

    checks = []

    def expiring(deadline):  # the budget runs out at the fourth check of the rules' loop: variables are bound by then
        checks.append(deadline)
        if len(checks) > 3:
            raise BudgetExceeded("over budget")

    monkeypatch.setattr(running, "check_deadline", expiring)

    def stopped():
        with pytest.raises(BudgetExceeded):
            engine.evaluate(Resource(copy.deepcopy(JOB)), deadline=float("inf"))

    assert _left_to_the_collector(stopped) == []
    assert len(checks) == 4


def test_a_variable_read_through_its_binding_sees_the_plain_context():
    from webhook.cel.environment import Expression

    context: dict = {"object": {"a": 2}}
    variables = Variables({"twice": Expression("object.a * 2")}, context)
    context["variables"] = variables
    assert variables.get("twice") == 4 and variables.context is context
