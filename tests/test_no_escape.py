"""No self-service escape (issue 12, item 2): nothing an object says about itself lowers its scrutiny.

Each test is one way a user who may create pods in an untrusted namespace could get a pod past the hardening
policies before the fix; the real engine and the built-in policies judge, as the webhook would.
"""

import os

import pytest
import yaml

from serverproc import make_review
from webhook.app import admission
from webhook.engine.core import Engine
from webhook.inputs import livefacts
from webhook.k8s.workload import Classification, build_workload
from webhook.language.bundle import DEFAULT_CONFIG_FILE
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource

IMAGE = "registry.example/x@sha256:" + "a" * 64


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


def namespace(name="tenant", tier="untrusted"):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"aiadmit.dev/tier": tier}}}


def escape_pod(labels=None, name="escape", ns="tenant"):
    """The pod of the issue: privileged, hostNetwork, hostPath /, a GPU."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"hostNetwork": True,
                     "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                     "containers": [{"name": "c", "image": IMAGE,
                                     "securityContext": {"privileged": True},
                                     "volumeMounts": [{"name": "root", "mountPath": "/host"}],
                                     "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": "1", "memory": "1Gi"},
                                                   "requests": {"cpu": "1", "memory": "1Gi"}}}]}}


def denied_policies(engine, obj, facts, **review):
    request = make_review(obj, **review)["request"]
    outcome = admission.validate(engine, request, facts)
    assert outcome.response["uid"] == request["uid"]
    return set(outcome.denied_policies) if not outcome.response["allowed"] else set()


def test_own_tier_label_cannot_lower_the_namespace_tier(engine):
    facts = OfflineFacts([Resource(namespace())])
    plain = denied_policies(engine, escape_pod(), facts)
    assert "untrusted-hardening" in plain
    labelled = denied_policies(engine, escape_pod({"aiadmit.dev/tier": "trusted"}), facts)
    assert "untrusted-hardening" in labelled, "a pod's own tier label let it out of its untrusted namespace"


def test_own_tier_label_may_raise_scrutiny():
    pod = escape_pod({"aiadmit.dev/tier": "untrusted"}, ns="team")
    workload = build_workload(Resource(pod), Classification(), {"aiadmit.dev/tier": "trusted"})
    assert "untrusted" in workload.classes and workload.tier == "untrusted"


def test_template_tier_label_raises_scrutiny_too():
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "team"},
                  "spec": {"template": {"metadata": {"labels": {"aiadmit.dev/tier": "untrusted"}},
                                        "spec": escape_pod()["spec"]}}}
    assert "untrusted" in build_workload(Resource(deployment), Classification()).classes


@pytest.mark.parametrize("role", ["training", "inference", "bogus"])
def test_notebook_kind_stays_a_notebook_whatever_its_role_label(role):
    notebook = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
                "metadata": {"name": "nb", "namespace": "team", "labels": {"aiadmit.dev/role": role}},
                "spec": {"template": {"spec": {"containers": [{"name": "nb", "image": IMAGE}]}}}}
    workload = build_workload(Resource(notebook), Classification())
    assert workload.role == "notebook" and {"notebook", "untrusted"} <= workload.classes


@pytest.mark.parametrize("where", ["pod", "template"])
def test_notebook_label_stays_a_notebook_whatever_its_role_label(engine, where):
    labels = {"notebook-name": "nb", "aiadmit.dev/role": "training"}
    if where == "pod":
        obj = escape_pod(labels, ns="team")
    else:  # the StatefulSet the notebook controller makes: a GPU one is "inference" by its kind
        obj = {"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "nb", "namespace": "team", "labels": {"aiadmit.dev/role": "training"}},
               "spec": {"template": {"metadata": {"labels": {"notebook-name": "nb"}}, "spec": escape_pod()["spec"]}}}
    workload = build_workload(Resource(obj), Classification())
    assert workload.role == "notebook" and "untrusted" in workload.classes
    assert "untrusted-hardening" in denied_policies(engine, obj, OfflineFacts([]))


# ------------------------------------------------------------------------------------------------ envFrom
def cpu_pod(env_from, ns="team"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": IMAGE, "envFrom": env_from,
                                     "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                                                   "requests": {"cpu": "1", "memory": "1Gi"}}}]}}


def configmap(data, name="devices", ns="team"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def devices_findings(engine, obj, facts):
    evaluation = engine.evaluate(Resource(obj), facts)
    return [f for f in evaluation.findings if f.policy == "devices-declared" and f.result in ("fail", "error")]


def test_device_variable_through_envfrom_configmap_is_denied(engine):
    facts = OfflineFacts([Resource(configmap({"NVIDIA_VISIBLE_DEVICES": "all"}))])
    found = devices_findings(engine, cpu_pod([{"configMapRef": {"name": "devices"}}]), facts)
    assert [(f.rule, f.action) for f in found] == [("visible-devices-env-from", "deny")], found
    assert "NVIDIA_VISIBLE_DEVICES" in found[0].message and "devices" in found[0].message
    assert found[0].pointer == "/spec/containers/0/envFrom"


def test_envfrom_prefix_makes_the_device_variable(engine):
    facts = OfflineFacts([Resource(configmap({"VISIBLE_DEVICES": "all"}))])
    found = devices_findings(engine, cpu_pod([{"prefix": "NVIDIA_", "configMapRef": {"name": "devices"}}]), facts)
    # ... and the prefix itself is refused: an edit of the ConfigMap after admission would make one (issue 21)
    assert sorted(f.rule for f in found) == ["env-from-device-prefix", "visible-devices-env-from"]


def test_envfrom_secret_in_the_same_input_is_resolved(engine):
    import base64
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team"},
              "data": {"AMD_VISIBLE_DEVICES": base64.b64encode(b"0,1").decode()}}
    found = devices_findings(engine, cpu_pod([{"secretRef": {"name": "s"}}]), OfflineFacts([Resource(secret)]))
    assert [f.rule for f in found] == ["visible-devices-env-from"]


def test_envfrom_without_device_variable_or_with_void_passes(engine):
    facts = OfflineFacts([Resource(configmap({"NVIDIA_VISIBLE_DEVICES": "void", "OTHER": "all"}))])
    assert devices_findings(engine, cpu_pod([{"configMapRef": {"name": "devices"}}]), facts) == []


def test_unknown_envfrom_source_is_a_warning(engine):
    found = devices_findings(engine, cpu_pod([{"configMapRef": {"name": "elsewhere"}}, {"secretRef": {"name": "s"}}]),
                             OfflineFacts([]))
    assert [(f.rule, f.action) for f in found] == [("env-from-unknown", "warn")], found
    assert "ConfigMap elsewhere" in found[0].message and "Secret s" in found[0].message


def test_envfrom_unknown_beside_a_device_request_is_still_a_warning(engine):
    """Issue 21: NVIDIA_VISIBLE_DEVICES=all beside one GPU is every GPU, so an unreadable source is said there too."""
    pod = cpu_pod([{"configMapRef": {"name": "elsewhere"}}])
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 1
    assert [(f.rule, f.action) for f in devices_findings(engine, pod, OfflineFacts([]))] == [("env-from-unknown", "warn")]


def test_live_facts_resolve_configmaps_from_a_projection_that_keeps_little():
    facts = livefacts.LiveFacts()
    cache = facts.caches["configmaps"]
    long = "x" * 5000
    cache.replace([configmap({"NVIDIA_VISIBLE_DEVICES": "all", "BIG": long}, ns="team")], "1")
    for other in facts.caches.values():
        other.synced, other.confirmed = True, facts.clock()
    found = facts.find("team", "ConfigMap", "devices")
    assert found.obj["data"]["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert len(found.obj["data"]["BIG"]) < 100  # a long value is never a no-device value; its text is not kept
    assert facts.find("team", "Secret", "devices") is None  # Secrets are never read by the webhook
    assert livefacts.configmap_projection(configmap({"A": "1"}))["metadata"] == {"name": "devices", "namespace": "team"}


# ------------------------------------------------------------------------------------------------ trusted controllers
def test_default_trusted_controllers_name_exact_namespaces():
    with open(DEFAULT_CONFIG_FILE, encoding="utf-8") as handle:
        identities = yaml.safe_load(handle)["trustedControllers"]
    assert identities
    for identity in identities:
        parts = identity.split(":")
        if identity.startswith("system:serviceaccount:"):
            assert len(parts) == 4, identity
            assert not any(c in parts[2] for c in "*?[]"), f"{identity}: wildcard in the namespace part"
            assert parts[2] and parts[3], identity
        else:
            assert not any(c in identity for c in "*?[]"), identity


def test_a_namespace_named_like_an_operator_is_not_trusted(engine):
    owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "r", "uid": "u", "controller": True}
    pod = escape_pod(ns="kuberay-evil")
    pod["metadata"]["ownerReferences"] = [owner]
    facts = OfflineFacts([Resource(namespace("kuberay-evil"))])
    denied = denied_policies(engine, pod, facts, username="system:serviceaccount:kuberay-evil:kuberay-operator")
    assert "untrusted-hardening" in denied


# ------------------------------------------------------------------------------------------------ ephemeral containers
def test_ephemeral_container_added_to_an_untrusted_pod_is_checked(engine):
    facts = OfflineFacts([Resource(namespace())])
    old = escape_pod()
    old["spec"] = {"automountServiceAccountToken": False,
                   "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                   "containers": [{"name": "c", "image": IMAGE,
                                   "securityContext": {"allowPrivilegeEscalation": False,
                                                       "capabilities": {"drop": ["ALL"]}}}]}
    new = yaml.safe_load(yaml.safe_dump(old))
    new["spec"]["ephemeralContainers"] = [{"name": "debug", "image": IMAGE, "securityContext": {"privileged": True}}]
    request = make_review(new, operation="UPDATE", old=old, sub_resource="ephemeralcontainers")["request"]
    outcome = admission.validate(engine, request, facts)
    assert not outcome.response["allowed"], outcome.response
    assert "untrusted-hardening" in outcome.denied_policies
    assert "debug" in outcome.response["status"]["message"]
    # other subresources (status, scale) stay unchecked
    request = make_review(new, operation="UPDATE", old=old, sub_resource="status")["request"]
    assert admission.validate(engine, request, facts).response["allowed"]


def test_webhook_configuration_sends_ephemeral_containers():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "manifests", "base", "webhooks.yaml"), encoding="utf-8") as handle:
        validating = next(yaml.safe_load_all(handle))
    resources = {r for rule in validating["webhooks"][0]["rules"] if rule["apiGroups"] == [""]
                 for r in rule["resources"]}
    assert "pods/ephemeralcontainers" in resources


# ------------------------------------------------------------------------------------------------ request wins
def test_request_kind_and_namespace_win_over_the_object(engine):
    facts = OfflineFacts([Resource(namespace())])
    pod = escape_pod(ns="tenant")
    disguised = dict(pod, kind="ConfigMap", metadata=dict(pod["metadata"], namespace="kube-system"))
    review = make_review(pod, namespace="tenant")
    review["request"]["object"] = disguised
    outcome = admission.validate(engine, review["request"], facts)
    assert not outcome.response["allowed"]
    assert "untrusted-hardening" in outcome.denied_policies


# ------------------------------------------------------------------------------------------------ exemptions recorded
def test_every_exemption_is_recorded_in_the_evaluation_and_the_review_log(tmp_path, caplog):
    import logging

    from webhook.app.server import EngineSource, Settings, create_app, setup_logging

    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\nannotationExemptable: [image-digest]\n"
                      "exceptions:\n- {name: lab, policies: [untrusted-hardening], namespaces: [tenant], "
                      "reason: the lab's own nodes}\n")
    engine = Engine.load(config_path=str(config))
    pod = escape_pod()
    pod["metadata"]["annotations"] = {"aiadmit.dev/exempt": "image-digest"}
    evaluation = engine.evaluate(Resource(pod), OfflineFacts([Resource(namespace())]))
    assert sorted(evaluation.exemptions) == ["image-digest: annotation aiadmit.dev/exempt",
                                             "untrusted-hardening: exception 'lab'"]
    client = create_app(EngineSource(engine, OfflineFacts([Resource(namespace())])), settings=Settings()).test_client()
    setup_logging()
    logger = logging.getLogger("aiadmit")
    logger.addHandler(caplog.handler)
    try:
        client.post("/validate", data=__import__("json").dumps(make_review(pod)), content_type="application/json",
                    buffered=True)  # read to its end and closed, as a WSGI server does
    finally:
        logger.removeHandler(caplog.handler)
    fields = [getattr(r, "fields", {}) for r in caplog.records if r.getMessage() == "review"]
    assert fields and fields[-1]["exempted"] == sorted(evaluation.exemptions)
