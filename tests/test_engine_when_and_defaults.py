"""Two engine behaviours the context-aware and mutating policies rely on.

- A rule's `when` that reads no cluster fact is evaluated before the rule's `requires`: unknown facts make a rule
  `skip` only where it applies (a CPU-only pod template is not "skipped" by a GPU quota rule).
- A `default` mutation walks through existing list items (containers, Ray worker groups, JobSet jobs) and adds
  the missing field there.
"""

import textwrap

from webhook.engine.core import Engine
from webhook.model.patch import default_op as _default_op
from webhook.model.facts import OfflineFacts
from webhook.inputs.sources import load_text

POLICY = textwrap.dedent("""
    apiVersion: aiadmit.dev/v1alpha1
    kind: Policy
    metadata: {name: needs-quota}
    summary: test policy
    why: test
    remediation: test
    action: deny
    match: {anyClasses: [ai]}
    target: container
    rules:
      - name: quota-known
        requires: [resourceQuotas]
        when: has(container.resources) && has(container.resources.limits) && "nvidia.com/gpu" in container.resources.limits
        expression: size(cluster.resourceQuotas) > 0
        message: container {{container.name}} has no quota
        path: /resources/limits
      - name: reads-cluster-in-when
        requires: [resourceQuotas]
        when: size(cluster.resourceQuotas) > 0
        expression: "true"
        message: never
    mutations:
      - {name: no-escalation, op: default, path: /securityContext/allowPrivilegeEscalation, value: "false"}
""")

JOB = textwrap.dedent("""
    apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    metadata: {name: ddp, namespace: ml}
    spec:
      pytorchReplicaSpecs:
        Master:
          template:
            spec:
              containers: [{name: launcher, image: "x:1"}]
        Worker:
          template:
            spec:
              containers:
                - {name: gpu, image: "x:1", resources: {limits: {nvidia.com/gpu: 1}}}
                - {name: sidecar, image: "x:1", securityContext: {allowPrivilegeEscalation: true}}
""")


def _engine(tmp_path):
    path = tmp_path / "needs-quota.yaml"
    path.write_text(POLICY)
    return Engine.load([str(path)])


def _job():
    return load_text(JOB, "job.yaml").resources[0]


def test_unknown_facts_skip_only_where_the_rule_applies(tmp_path):
    engine = _engine(tmp_path)
    findings = engine.evaluate(_job()).findings
    skipped = [(f.rule, f.pointer) for f in findings if f.result == "skip"]
    # Only the GPU container; the launcher and the sidecar do not meet the `when`. A `when` that itself reads
    # `cluster` cannot be decided without the facts: that rule still skips everywhere.
    assert ("quota-known", "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources/limits") in skipped
    assert [r for r, _ in skipped].count("quota-known") == 1
    assert [r for r, _ in skipped].count("reads-cluster-in-when") == 3


def test_known_facts_still_evaluate_the_rule(tmp_path):
    engine = _engine(tmp_path)
    namespace = load_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n", "ns.yaml").resources
    findings = engine.evaluate(_job(), OfflineFacts(namespace)).findings
    assert [(f.rule, f.result) for f in findings] == [("quota-known", "fail")]


def test_default_mutation_reaches_list_items(tmp_path):
    engine = _engine(tmp_path)
    mutation = engine.mutate(_job())
    assert mutation.errors == []
    # The sidecar's explicit `true` is kept; the other two containers get the default.
    assert mutation.operations == [
        {"op": "add", "path": "/spec/pytorchReplicaSpecs/Master/template/spec/containers/0/securityContext",
         "value": {"allowPrivilegeEscalation": False}},
        {"op": "add", "path": "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/securityContext",
         "value": {"allowPrivilegeEscalation": False}},
    ]


def test_default_op_does_not_invent_list_items():
    document = {"spec": {"containers": [{"name": "a"}]}}
    assert _default_op(document, "/spec/containers/3/securityContext", {}) is None
    assert _default_op(document, "/spec/containers/x/securityContext", {}) is None
    assert _default_op(document, "/spec/containers/0/securityContext/runAsNonRoot", True) == {
        "op": "add", "path": "/spec/containers/0/securityContext", "value": {"runAsNonRoot": True}}
