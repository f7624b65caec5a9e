"""Rule-level `target: pod` inside a container policy, and the object-level `templates` variable.

devices-declared needs both levels in one policy (whole-device limits per container, accelerator node selection per
pod); gang-admission and spot-checkpointing judge the whole workload across its pod templates.
"""

import textwrap

import pytest

from webhook.engine.core import Engine
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError
from webhook.inputs.sources import load_text

POLICY = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata: {name: two-levels}
summary: s
why: w
remediation: r
action: deny
match: {classes: [pod]}
target: %(target)s
rules:
  - name: per-container
    expression: has(container.image)
    message: container {{container.name}} has no image
    path: /image
  - name: per-pod
    target: pod
    expression: has(pod.nodeName)
    message: "{{template}} has {{size(pod.containers)}} containers and no nodeName"
    path: /nodeName
"""

TEMPLATES = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata: {name: counts}
summary: s
why: w
remediation: r
action: warn
match: {classes: [pod]}
target: object
rules:
  - name: listed
    expression: "false"
    message: "{{join(templates.map(t, t.name + '=' + string(t.podCount) + '/' + string(size(t.containers))), ' ')}}"
"""

JOB = textwrap.dedent("""\
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: j, namespace: ml}
    spec:
      pytorchReplicaSpecs:
        Master:
          template:
            spec:
              containers: [{name: a}, {name: b, image: x}]
        Worker:
          replicas: 3
          template:
            spec:
              containers: [{name: c, image: x}]
    """)


def engine_for(tmp_path, text: str) -> Engine:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return Engine(load_policies([str(path)]))


def test_pod_rule_of_a_container_policy_runs_once_per_template(tmp_path):
    engine = engine_for(tmp_path, POLICY % {"target": "container"})
    findings = engine.evaluate(load_text(JOB, "job.yaml").resources[0]).findings
    assert sorted((f.rule, f.pointer) for f in findings) == [
        ("per-container", "/spec/pytorchReplicaSpecs/Master/template/spec/containers/0/image"),
        ("per-pod", "/spec/pytorchReplicaSpecs/Master/template/spec/nodeName"),
        ("per-pod", "/spec/pytorchReplicaSpecs/Worker/template/spec/nodeName"),
    ]
    assert {f.message for f in findings if f.rule == "per-pod"} == {
        "Master has 2 containers and no nodeName", "Worker has 1 containers and no nodeName"}


def test_only_a_container_policy_may_have_pod_rules(tmp_path):
    with pytest.raises(PolicyLoadError) as caught:
        engine_for(tmp_path, POLICY % {"target": "object"})
    problems = [p for p in caught.value.problems if "only a rule of a container policy can target the pod" in p]
    assert len(problems) == 1 and problems[0].startswith(str(tmp_path / "policy.yaml") + ":16:"), problems


def test_templates_lists_every_pod_template_with_its_pod_count(tmp_path):
    engine = engine_for(tmp_path, TEMPLATES)
    findings = engine.evaluate(load_text(JOB, "job.yaml").resources[0]).findings
    assert [f.message for f in findings] == ["Master=1/2 Worker=3/1"]
