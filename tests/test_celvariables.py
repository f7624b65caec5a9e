"""The shape of a ValidatingAdmissionPolicy: named `variables` (lazy, at most once per binding), `messageExpression`,
VAP's variable names beside aiadmit's, and the engine-bound `containerName`."""

from __future__ import annotations

import pytest

from webhook.engine.core import Engine
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError
from webhook.model.resource import Resource

POLICY = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: vap-shape
summary: A test policy.
why: Because.
remediation: Fix it.
action: deny
match:
  anyClasses: [ai]
target: container
params:
  maxGpus: 2
variables:
  - name: gpus
    expression: >-
      has(container.resources) && has(container.resources.limits) &&
      "nvidia.com/gpu" in container.resources.limits ? int(container.resources.limits["nvidia.com/gpu"]) : 0
  - name: tooMany
    expression: variables.gpus > params.maxGpus
  - name: kindName
    expression: object.kind + "/" + object.metadata.name
rules:
  - name: gpu-count
    expression: "!variables.tooMany"
    messageExpression: >-
      "container " + containerName + " of " + variables.kindName + " asks for " + string(variables.gpus) +
      " GPUs, more than " + string(params.maxGpus)
  - name: vap-names
    expression: oldObject == null && request.operation == "CREATE" && request.kind.kind == object.kind
    message: never
"""
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
       "spec": {"containers": [{"name": "big", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}},
                               {"name": "ok", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def _engine(tmp_path, text=POLICY) -> Engine:
    path = tmp_path / "vap.yaml"
    path.write_text(text)
    return Engine(load_policies([str(path)]))


def test_variables_message_expression_and_vap_names(tmp_path):
    findings = _engine(tmp_path).evaluate(Resource(POD)).findings
    assert [(f.rule, f.message) for f in findings] == [
        ("gpu-count", "container big of Pod/p asks for 4 GPUs, more than 2")]


@pytest.mark.parametrize("inlined", [True, False], ids=["computed-in-the-reader", "own-program"])
def test_a_variable_is_evaluated_at_most_once_per_binding(tmp_path, monkeypatch, inlined):
    """`gpus` is read by tooMany, by the rule and by its message: computed once per container all the same, whether
    the reader computes it in place (the compiler inlines it) or calls its own program."""
    from webhook.cel import values

    engine = _engine(tmp_path)
    if not inlined:
        for expression in engine.policies[0].expressions():
            expression.inline = None
    computed = []

    class Recording(dict):
        def __setitem__(self, name, value):
            computed.append(name)
            super().__setitem__(name, value)

    original = values.Variables.__init__

    def init(self, programs, context):
        original(self, programs, context)
        self.values = Recording()
    monkeypatch.setattr(values.Variables, "__init__", init)
    engine.evaluate(Resource(POD))
    assert computed.count("gpus") == 2  # the two containers
    assert computed.count("tooMany") == 2


def test_an_error_in_a_variable_is_raised_at_every_read(tmp_path):
    text = POLICY.replace('int(container.resources.limits["nvidia.com/gpu"]) : 0',
                          'int(container.resources.limits["nvidia.com/gpu"]) / 0 : 0')
    findings = _engine(tmp_path, text).evaluate(Resource(POD)).findings
    errors = [f for f in findings if f.rule == "gpu-count"]
    assert [f.result for f in errors] == ["error", "error"] and all("divi" in f.message for f in errors), errors


@pytest.mark.parametrize("old, new, message", [
    ("variables.gpus > params.maxGpus", "variables.gpu > params.maxGpus", "variables has no field 'gpu'"),
    ("variables.gpus > params.maxGpus", "variables.kindName > 1", "variables has no field 'kindName'"),  # later
    ('" GPUs, more than "', '" GPUs, more than " + 1', "no matching overload for '+'"),
])
def test_variable_errors_fail_the_load_at_their_place(tmp_path, old, new, message):
    with pytest.raises(PolicyLoadError) as raised:
        _engine(tmp_path, POLICY.replace(old, new))
    assert any(message in problem for problem in raised.value.problems), raised.value.problems


def test_a_rule_needs_the_pod_only_through_the_variables_it_reads(tmp_path):
    """A variable that reads `pod` must not keep a rule that never reads it from a kind with no pod spec (a TrainJob's
    trainer): each rule binds, and is planned by, only the variables it names (and what those read)."""
    text = POLICY.replace("""  - name: kindName
    expression: object.kind + "/" + object.metadata.name
""", """  - name: kindName
    expression: object.kind + "/" + object.metadata.name
  - name: podClass
    expression: 'has(pod.priorityClassName) ? pod.priorityClassName : ""'
""").replace("""  - name: vap-names""", """  - name: pod-class
    target: pod
    expression: variables.podClass != ""
    message: no class
  - name: vap-names""")
    (tmp_path / "vap.yaml").write_text(text)
    policy = load_policies([str(tmp_path / "vap.yaml")])[0]
    rules = {rule.name: rule for rule in policy.rules}
    assert not rules["gpu-count"].needs_pod and "pod" not in rules["gpu-count"].variables
    assert rules["pod-class"].needs_pod
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "t", "namespace": "n"},
                "spec": {"runtimeRef": {"name": "torch"},
                         "trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}}}
    findings = Engine([policy]).evaluate(Resource(trainjob)).findings
    assert [(f.rule, f.message) for f in findings] == [
        ("gpu-count", "container trainer of TrainJob/t asks for 4 GPUs, more than 2")]
