"""`matchPolicy` of a ValidatingAdmissionPolicy's matchConstraints (and a binding's matchResources), offline:
Equivalent (the default) never silently leaves out an object the API server may match through another version of
the same resource; Exact matches only the versions named; anything else does not load."""

from __future__ import annotations

import textwrap

import pytest

from webhook.app.audit import audit_paths
from webhook.engine.core import Engine

POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas.example.com}
spec:
  matchConstraints:
    %(policy)s
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
    - {apiGroups: [ray.io], apiVersions: [v1], operations: [CREATE], resources: [rayclusters]}
  validations:
  - {expression: "!has(object.spec.replicas) || object.spec.replicas <= 5", message: too many}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: replicas.example.com, validationActions: [Deny]}
"""
OBJECTS = """\
apiVersion: apps/v1beta1
kind: Deployment
metadata: {name: old-form, namespace: default}
spec: {replicas: 9}
---
apiVersion: ray.io/v1alpha1
kind: RayCluster
metadata: {name: ray-alpha, namespace: default}
spec: {}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: current, namespace: default}
spec: {replicas: 9, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: []}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: other-resource, namespace: default}
spec: {template: {spec: {containers: []}}}
"""


def _findings(tmp_path, policy_line: str) -> dict:
    (tmp_path / "vap.yaml").write_text(POLICY % {"policy": policy_line})
    (tmp_path / "objects.yaml").write_text(OBJECTS)
    result = audit_paths(Engine.load([str(tmp_path / "vap.yaml")]), [str(tmp_path / "objects.yaml")])
    return {e.resource.name: [(f.result, f.message) for f in e.findings] for e in result.evaluations}


@pytest.mark.parametrize("policy_line", ["", "matchPolicy: Equivalent"])
def test_equivalent_skips_another_version_of_a_named_resource(tmp_path, policy_line):
    found = _findings(tmp_path, policy_line)
    for name, version in (("old-form", "apps/v1beta1"), ("ray-alpha", "ray.io/v1alpha1")):
        [(result, message)] = found[name]
        assert result == "skip" and f"the object is {version}" in message and "matchPolicy Equivalent" in message
    assert [r for r, _ in found["current"]] == ["fail"]  # its own version is named: evaluated
    assert found["other-resource"] == []  # another resource: no rule matches in any version


def test_exact_matches_only_the_named_versions(tmp_path):
    found = _findings(tmp_path, "matchPolicy: Exact")
    assert found["old-form"] == [] and found["ray-alpha"] == [] and found["other-resource"] == []
    assert [r for r, _ in found["current"]] == ["fail"]


def test_exclusion_in_another_version_is_unknown(tmp_path):
    (tmp_path / "vap.yaml").write_text(POLICY.replace("%(policy)s\n    resourceRules:", textwrap.dedent("""\
        excludeResourceRules:
            - {apiGroups: [apps], apiVersions: [v1beta2], operations: [CREATE], resources: [deployments]}
            resourceRules:""")).replace("apiVersions: [v1], operations: [CREATE], resources: [deployments]",
                                        "apiVersions: ['*'], operations: [CREATE], resources: [deployments]"))
    (tmp_path / "objects.yaml").write_text(OBJECTS)
    result = audit_paths(Engine.load([str(tmp_path / "vap.yaml")]), [str(tmp_path / "objects.yaml")])
    found = {e.resource.name: [(f.result, f.message) for f in e.findings] for e in result.evaluations}
    [(result_, message)] = found["current"]
    assert result_ == "skip" and message.startswith("skipped: excludeResourceRules: matchPolicy Equivalent")


def test_an_unknown_match_policy_does_not_load(tmp_path):
    (tmp_path / "vap.yaml").write_text(POLICY % {"policy": "matchPolicy: Exactly"})
    with pytest.raises(Exception) as info:
        Engine.load([str(tmp_path / "vap.yaml")])
    assert "must be Exact or Equivalent, not 'Exactly'" in str(getattr(info.value, "problems", None) or info.value)
