"""The API server's defaulting before admission (k8s/defaults.py), and ValidatingAdmissionPolicies seeing it."""

from __future__ import annotations

import textwrap

import pytest

from webhook.app.audit import audit_paths
from webhook.engine.core import Engine
from webhook.k8s.defaults import defaulted, pull_policy


@pytest.mark.parametrize("image,policy", [("nginx", "Always"), ("nginx:latest", "Always"),
                                          ("registry:5000/team/nginx", "Always"), ("nginx:1.27", "IfNotPresent"),
                                          ("registry:5000/nginx:1.27", "IfNotPresent"),
                                          ("nginx@sha256:" + "a" * 64, "IfNotPresent")])
def test_pull_policy(image, policy):
    assert pull_policy(image) == policy


def test_deployment_defaults():
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx",
                                                          "resources": {"limits": {"cpu": "1"}}}]}}}}
    out = defaulted(obj, "apps", "Deployment")
    assert "replicas" not in obj["spec"]  # the input is not changed
    spec = out["spec"]
    assert spec["replicas"] == 1 and spec["revisionHistoryLimit"] == 10 and spec["progressDeadlineSeconds"] == 600
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    pod = spec["template"]["spec"]
    assert (pod["restartPolicy"], pod["dnsPolicy"], pod["schedulerName"], pod["securityContext"],
            pod["terminationGracePeriodSeconds"]) == ("Always", "ClusterFirst", "default-scheduler", {}, 30)
    [container] = pod["containers"]
    assert (container["imagePullPolicy"], container["terminationMessagePath"],
            container["terminationMessagePolicy"]) == ("Always", "/dev/termination-log", "File")
    assert "requests" not in container["resources"]  # only a Pod's containers get requests from limits
    assert "tolerations" not in pod  # DefaultTolerationSeconds admits Pods, not templates


def test_recreate_strategy_gets_no_rolling_update():
    obj = {"spec": {"strategy": {"type": "Recreate"}, "template": {"spec": {"containers": []}}}}
    assert defaulted(obj, "apps", "Deployment")["spec"]["strategy"] == {"type": "Recreate"}


def test_pod_defaults_requests_and_tolerations():
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"cpu": "2", "memory": "1Gi"},
                                                                          "requests": {"cpu": "1"}},
                                    "readinessProbe": {"httpGet": {"port": 8080}}}],
                    "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                     "effect": "NoExecute", "tolerationSeconds": 60}]}}
    spec = defaulted(obj, "", "Pod")["spec"]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert spec["containers"][0]["readinessProbe"] == {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"},
                                                        "timeoutSeconds": 1, "periodSeconds": 10,
                                                        "successThreshold": 1, "failureThreshold": 3}
    assert spec["tolerations"] == [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
    assert spec["enableServiceLinks"] is True


def test_job_and_unknown_kinds():
    job = defaulted({"spec": {"template": {"spec": {}}}}, "batch", "Job")["spec"]
    assert (job["completions"], job["parallelism"], job["backoffLimit"], job["completionMode"]) == \
        (1, 1, 6, "NonIndexed")
    assert "completions" not in defaulted({"spec": {"parallelism": 4}}, "batch", "Job")["spec"]
    crd = {"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}}
    assert defaulted(crd, "kubeflow.org", "PyTorchJob") is crd  # a CRD's defaults are its schema's: not applied


def test_a_policy_sees_the_defaulted_object(tmp_path):
    (tmp_path / "vap.yaml").write_text(textwrap.dedent("""\
        apiVersion: admissionregistration.k8s.io/v1
        kind: ValidatingAdmissionPolicy
        metadata: {name: defaults.example.com}
        spec:
          matchConstraints:
            resourceRules:
            - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
          validations:
          - expression: "object.spec.replicas <= 5"
          - expression: "object.spec.template.spec.containers.all(c, c.imagePullPolicy != 'Always')"
            message: "pin the image"
        ---
        apiVersion: admissionregistration.k8s.io/v1
        kind: ValidatingAdmissionPolicyBinding
        metadata: {name: b}
        spec: {policyName: defaults.example.com, validationActions: [Deny]}
        """))
    deployment = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s, namespace: default}\nspec:\n"
                  "  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n"
                  "    spec: {containers: [{name: c, image: '%s'}]}\n")
    (tmp_path / "objects.yaml").write_text(deployment % ("pinned", "nginx:1.27") + "---\n"
                                           + deployment % ("latest", "nginx"))
    result = audit_paths(Engine.load([str(tmp_path / "vap.yaml")]), [str(tmp_path / "objects.yaml")])
    by_name = {e.resource.name: e for e in result.evaluations}
    assert by_name["pinned"].findings == []  # no `replicas`: 1, as the API server defaults it; no error
    assert [f.message.rsplit(": ", 1)[1] for f in by_name["latest"].findings] == ["pin the image"]


def test_volume_sources_field_refs_and_claims():
    pod = {"spec": {"containers": [{"name": "c", "image": "x:1",
                                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
                    "volumes": [{"name": "h", "hostPath": {"path": "/var/log"}},
                                {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {
                                    "fieldPath": "metadata.name"}}]}},
                                {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                                {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {
                                    "accessModes": ["ReadWriteOnce"]}}}}]}}
    spec = defaulted(pod, "", "Pod")["spec"]
    assert spec["containers"][0]["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "metadata.name", "apiVersion": "v1"}
    hostpath, downward, projected, ephemeral = spec["volumes"]
    assert hostpath["hostPath"] == {"path": "/var/log", "type": ""}
    assert downward["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"] == "v1"
    assert downward["downwardAPI"]["defaultMode"] == 420 and projected["projected"]["defaultMode"] == 420
    assert projected["projected"]["sources"][0]["serviceAccountToken"] == {"path": "t", "expirationSeconds": 3600}
    assert ephemeral["ephemeral"]["volumeClaimTemplate"]["spec"]["volumeMode"] == "Filesystem"


def test_job_replacement_and_per_index_backoff():
    plain = defaulted({"spec": {"template": {"spec": {}}}}, "batch", "Job")["spec"]
    assert (plain["podReplacementPolicy"], plain["backoffLimit"]) == ("TerminatingOrFailed", 6)
    indexed = defaulted({"spec": {"backoffLimitPerIndex": 2, "podFailurePolicy": {"rules": []},
                                  "template": {"spec": {}}}}, "batch", "Job")["spec"]
    assert (indexed["podReplacementPolicy"], indexed["backoffLimit"]) == ("Failed", 2147483647)


def test_host_network_pod_ports_are_host_ports():
    pod = {"spec": {"hostNetwork": True, "containers": [{"name": "c", "image": "x:1", "ports": [
        {"containerPort": 8080}, {"containerPort": 9090, "hostPort": 9091}]}]}}
    ports = defaulted(pod, "", "Pod")["spec"]["containers"][0]["ports"]
    assert [(p["containerPort"], p["hostPort"]) for p in ports] == [(8080, 8080), (9090, 9091)]
    template = {"spec": {"selector": {}, "template": {"spec": pod["spec"]}}}
    assert "hostPort" not in defaulted(template, "apps", "Deployment")["spec"]["template"]["spec"]["containers"][0][
        "ports"][0]  # a template's ports are left alone


def test_statefulset_rolling_update_made_only_when_the_type_was_unset():
    """SetDefaults_StatefulSet makes rollingUpdate (partition 0, maxUnavailable 1) only for an unset type; an
    explicit RollingUpdate without rollingUpdate stays so, and its claims get apiVersion/kind and phase Pending."""
    spec = {"selector": {"matchLabels": {"a": "s"}}, "template": {"metadata": {"labels": {"a": "s"}}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]}
    untyped = defaulted({"kind": "StatefulSet", "spec": spec}, "apps", "StatefulSet")["spec"]
    assert untyped["updateStrategy"] == {"type": "RollingUpdate",
                                         "rollingUpdate": {"partition": 0, "maxUnavailable": 1}}
    [claim] = untyped["volumeClaimTemplates"]
    assert (claim["apiVersion"], claim["kind"], claim["status"], claim["spec"]["volumeMode"]) == (
        "v1", "PersistentVolumeClaim", {"phase": "Pending"}, "Filesystem")
    typed = defaulted({"kind": "StatefulSet", "spec": {**spec, "updateStrategy": {"type": "RollingUpdate"}}},
                      "apps", "StatefulSet")["spec"]
    assert typed["updateStrategy"] == {"type": "RollingUpdate"}


def test_replication_controller_and_job_take_the_template_labels():
    """SetDefaults_ReplicationController / SetDefaults_Job: empty labels (and an RC's selector) from the template."""
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}
    rc = defaulted({"kind": "ReplicationController", "metadata": {"name": "r"}, "spec": {"template": template}},
                   "", "ReplicationController")
    assert rc["metadata"]["labels"] == rc["spec"]["selector"] == {"app": "x"}
    job = defaulted({"kind": "Job", "metadata": {"name": "j", "labels": {"own": "1"}}, "spec": {"template": template}},
                    "batch", "Job")
    assert job["metadata"]["labels"] == {"own": "1"} and job["spec"]["manualSelector"] is False
    assert "selector" not in job["spec"]  # generated from the uid by the API server, not defaulted
