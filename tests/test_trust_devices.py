"""Invariant (e): every way a container gets a device is a device path (docs/security.md).

Generated, not hand-written: every device path below (a variable from env, valueFrom or envFrom, behind a prefix;
node pinning by nodeSelector, required or preferred affinity, an instance type, matchFields or nodeName) is tried at
every pod-template location of every kind of webhook/k8s/kinds.yaml, in a tenant namespace, and must be denied by
devices-declared; its safe twin at the same place must not be. The real engine and bundle judge.
"""

import copy
import os

import pytest
import yaml

from serverproc import make_review
from templates import first_location, locations, untrusted_facts
from webhook.app import admission
from webhook.engine.core import Engine
from webhook.language.bundle import DEFAULT_CONFIG_FILE
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource

IMAGE = "registry.example/x@sha256:" + "a" * 64
RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}, "limits": {"memory": "1Gi"}}
GPU_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                 "limits": {"memory": "1Gi", "nvidia.com/gpu": 1}}
NODE = {"apiVersion": "v1", "kind": "Node"}
FACTS = [{**NODE, "metadata": {"name": "gpu-node", "labels": {"nvidia.com/gpu.present": "true"}}},
         {**NODE, "metadata": {"name": "a100", "labels": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}}},
         {**NODE, "metadata": {"name": "cpu-node", "labels": {"node.kubernetes.io/instance-type": "m6i.large"}}},
         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "devices", "namespace": "team"},
          "data": {"NVIDIA_VISIBLE_DEVICES": "all"}},
         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "short", "namespace": "team"},
          "data": {"VISIBLE_DEVICES": "all"}},
         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "quiet", "namespace": "team"},
          "data": {"NVIDIA_VISIBLE_DEVICES": "void", "VISIBLE_DEVICES": "void"}}]


def container(**fields):
    return {"name": "c", "image": IMAGE, "resources": copy.deepcopy(RESOURCES), **fields}


def affinity(kind, *expressions, fields=None):
    term = {"matchExpressions": list(expressions)} if expressions else {"matchFields": fields}
    if kind == "required":
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]}}


TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
# name -> (the pod spec that takes devices, the rule that must deny it, its safe twin)
ENV_PATHS = {
    "env all, no device": ({"containers": [container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])]},
                           "visible-devices-env",
                           {"containers": [container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])]}),
    "env all beside one GPU": ({"containers": [container(resources=GPU_RESOURCES, env=[
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])]}, "visible-devices-env",
        {"containers": [container(resources=GPU_RESOURCES)]}),
    "env valueFrom": ({"containers": [container(env=[{"name": "ROCR_VISIBLE_DEVICES", "valueFrom": {
        "configMapKeyRef": {"name": "devices", "key": "NVIDIA_VISIBLE_DEVICES"}}}])]}, "visible-devices-env",
        {"containers": [container(env=[{"name": "OTHER", "valueFrom": {
            "configMapKeyRef": {"name": "devices", "key": "NVIDIA_VISIBLE_DEVICES"}}}])]}),
    "envFrom ConfigMap": ({"containers": [container(envFrom=[{"configMapRef": {"name": "devices"}}])]},
                          "visible-devices-env-from",
                          {"containers": [container(envFrom=[{"configMapRef": {"name": "quiet"}}])]}),
    "envFrom ConfigMap beside one GPU": ({"containers": [container(resources=GPU_RESOURCES, envFrom=[
        {"configMapRef": {"name": "devices"}}])]}, "visible-devices-env-from",
        {"containers": [container(resources=GPU_RESOURCES, envFrom=[{"configMapRef": {"name": "quiet"}}])]}),
    "envFrom prefix": ({"containers": [container(envFrom=[{"prefix": "NVIDIA_", "configMapRef": {"name": "short"}}])]},
                       "visible-devices-env-from",
                       {"containers": [container(envFrom=[{"prefix": "APP_", "configMapRef": {"name": "short"}}])]}),
    # The ConfigMap says VISIBLE_DEVICES=void today; an edit to `all` tomorrow is seen by nobody: the prefix is refused.
    "envFrom prefix of a device variable": ({"containers": [container(envFrom=[
        {"prefix": "NVIDIA_", "configMapRef": {"name": "quiet"}}])]}, "env-from-device-prefix",
        {"containers": [container(envFrom=[{"prefix": "NVIDIA_VISIBLE_DEVICES_", "configMapRef": {"name": "quiet"}}])]}),
}
NODE_PATHS = {
    "nodeSelector label": ({"nodeSelector": {"nvidia.com/gpu.present": "true"}}, "node-selector",
                           {"nodeSelector": {"kubernetes.io/os": "linux"}}),
    "nodeSelector instance type": ({"nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
                                   "node-selector", {"nodeSelector": {"node.kubernetes.io/instance-type": "m6i.large"}}),
    "required Exists": ({"affinity": affinity("required", {"key": "nvidia.com/gpu.product", "operator": "Exists"})},
                        "node-affinity",
                        {"affinity": affinity("required", {"key": "nvidia.com/gpu.product", "operator": "DoesNotExist"})}),
    "required In": ({"affinity": affinity("required", {"key": "nvidia.com/gpu.present", "operator": "In",
                                                       "values": ["true"]})}, "node-affinity",
                    {"affinity": affinity("required", {"key": "nvidia.com/gpu.present", "operator": "NotIn",
                                                       "values": ["true"]})}),
    "required gpu.count Lt": ({"affinity": affinity("required", {"key": "nvidia.com/gpu.count", "operator": "Lt",
                                                                 "values": ["9"]})}, "node-affinity",
                              {"affinity": affinity("required", {"key": "nvidia.com/gpu.count", "operator": "Lt",
                                                                 "values": ["1"]})}),
    "required Gt": ({"affinity": affinity("required", {"key": "nvidia.com/gpu.count", "operator": "Gt",
                                                       "values": ["0"]})}, "node-affinity", {}),
    "required instance type": ({"affinity": affinity("required", {"key": "karpenter.k8s.aws/instance-family",
                                                                  "operator": "In", "values": ["g5"]})},
                               "node-affinity",
                               {"affinity": affinity("required", {"key": "karpenter.k8s.aws/instance-family",
                                                                  "operator": "In", "values": ["c7i"]})}),
    "preferred with toleration": ({"tolerations": TOLERATE_GPU, "affinity": affinity(
        "preferred", {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]})}, "node-affinity",
        {"tolerations": TOLERATE_GPU}),
    "matchFields": ({"affinity": affinity("required", fields=[{"key": "metadata.name", "operator": "In",
                                                               "values": ["gpu-node"]}])}, "node-fields",
                    {"affinity": affinity("required", fields=[{"key": "metadata.name", "operator": "In",
                                                               "values": ["cpu-node"]}])}),
    "nodeName": ({"nodeName": "a100"}, "node-name", {"nodeName": "cpu-node"}),
    "nodeName of no known node": ({"nodeName": "gpu-node-to-come"}, "node-name", {}),
}


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


@pytest.fixture(scope="module")
def facts():
    return OfflineFacts([Resource(o) for o in FACTS])


def devices_denials(engine, obj, facts):
    evaluation = engine.evaluate(Resource(obj), facts)
    assert not evaluation.errors, (obj["kind"], evaluation.errors)
    return {f.rule for f in evaluation.findings if f.policy == "devices-declared" and f.blocking}


def sweep(engine, facts, spec, rule, twin, pod_spec_only):
    """Locations where `spec` is not denied by `rule`, and where its twin is denied at all."""
    missed, wrong = [], []
    for location in locations():
        if pod_spec_only and not location.has_pod_spec:
            continue
        if not location.has_pod_spec and "containers" not in spec:
            continue
        found = devices_denials(engine, location.build({"containers": [container()], **spec}), facts)
        if rule not in found:
            missed.append(f"{location.name}: {sorted(found)}")
        if twin is not None:
            safe = devices_denials(engine, location.build({"containers": [container()], **twin}), facts)
            if safe:
                wrong.append(f"{location.name}: {sorted(safe)}")
    return missed, wrong


@pytest.mark.parametrize("path", sorted(ENV_PATHS))
def test_every_device_variable_source_is_denied_at_every_template_location(engine, facts, path):
    spec, rule, twin = ENV_PATHS[path]
    missed, wrong = sweep(engine, facts, spec, rule, twin, pod_spec_only=False)
    assert not missed, f"{path} passed at: {missed}"
    assert not wrong, f"the safe twin of {path} was denied at: {wrong}"


@pytest.mark.parametrize("path", sorted(NODE_PATHS))
def test_every_node_pinning_form_is_denied_at_every_template_location(engine, facts, path):
    spec, rule, twin = NODE_PATHS[path]
    missed, wrong = sweep(engine, facts, spec, rule, twin or None, pod_spec_only=True)
    assert not missed, f"{path} passed at: {missed}"
    assert not wrong, f"the safe twin of {path} was denied at: {wrong}"


def test_a_device_less_pod_pinned_by_name_skips_with_its_reason_when_nodes_are_unknown(engine):
    evaluation = engine.evaluate(Resource(first_location("", "Pod").build({"containers": [container()],
                                                                           "nodeName": "n1"})), OfflineFacts([]))
    found = [(f.rule, f.result) for f in evaluation.findings if f.policy == "devices-declared"]
    assert found == [("node-name", "skip")], found
    assert "cluster facts unknown: nodes" in evaluation.findings[0].message


@pytest.mark.parametrize("variable", ["NVIDIA_VISIBLE_DEVICES", "AMD_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                                      "HABANA_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES"])
def test_a_configmap_that_carries_a_device_variable_is_denied_when_written(engine, variable):
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "team"},
                 "data": {variable: "all"}}
    for operation in ("CREATE", "UPDATE"):
        old = dict(configmap, data={variable: "void"}) if operation == "UPDATE" else None
        outcome = admission.validate(engine, make_review(configmap, operation, old)["request"], OfflineFacts([]))
        assert outcome.denied_policies == ["device-variables"], (operation, outcome.response)
    configmap["data"] = {variable: "none", "OTHER": "all"}
    assert admission.validate(engine, make_review(configmap)["request"], OfflineFacts([])).response["allowed"]


def test_configmaps_are_sent_to_the_validating_webhook_and_the_device_names_agree():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for path in ("manifests/base/webhooks.yaml", "charts/aiadmit/templates/webhooks.yaml"):
        text = open(f"{root}/{path}", encoding="utf-8").read()
        validating = text.split("kind: MutatingWebhookConfiguration")[0]
        assert "configmaps" in validating and "configmaps" not in text.split("kind: MutatingWebhookConfiguration")[1]
    policies = {name: yaml.safe_load(open(f"{root}/policies/{name}.yaml", encoding="utf-8"))["params"]
                for name in ("devices-declared", "device-variables")}
    for param in ("visibleDevicesEnv", "noDeviceValues"):
        assert policies["devices-declared"][param] == policies["device-variables"][param], param


def test_an_untrusted_container_may_not_load_a_whole_secret_and_elsewhere_it_is_a_warning(engine):
    spec = {"containers": [container(resources=GPU_RESOURCES, envFrom=[{"secretRef": {"name": "hf-token"}}])]}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tenant",
                                                                       "labels": {"aiadmit.dev/tier": "untrusted"}}}
    pod = first_location("", "Pod").build(spec, namespace="tenant")
    untrusted = engine.evaluate(Resource(pod), OfflineFacts([Resource(namespace)]))
    assert "env-from-secret-untrusted" in {f.rule for f in untrusted.findings if f.blocking}
    plain = engine.evaluate(Resource(first_location("", "Pod").build(spec)), OfflineFacts([]))
    assert [(f.rule, f.action) for f in plain.findings if f.policy == "devices-declared"] == \
        [("env-from-unknown", "warn")]


# ------------------------------------------------------------------------------------------------ sharing
SHARING = {
    "MIG slice time-shared": ({"containers": [container(resources={"limits": {"nvidia.com/mig-1g.10gb.shared": 1}})]},
                              "no-shared-devices"),
    "GKE time-sharing by required affinity": ({"affinity": affinity("required", {
        "key": "cloud.google.com/gke-gpu-sharing-strategy", "operator": "In", "values": ["time-sharing"]})},
        "no-shared-gpu-node-affinity"),
    "GKE sharing by preferred affinity": ({"affinity": affinity("preferred", {
        "key": "cloud.google.com/gke-max-shared-clients-per-gpu", "operator": "Exists"})},
        "no-shared-gpu-node-affinity"),
}


@pytest.mark.parametrize("path", sorted(SHARING))
def test_every_way_to_ask_for_a_shared_gpu_is_denied_to_untrusted_workloads(engine, path):
    spec, rule = SHARING[path]
    facts, missed = untrusted_facts(), []
    for location in locations():
        if not location.has_pod_spec and "containers" not in spec:
            continue
        obj = location.build({"containers": [container(resources=GPU_RESOURCES)], **spec}, namespace="tenant")
        found = {f.rule for f in engine.evaluate(Resource(obj), facts).findings
                 if f.policy == "untrusted-gpu-isolation" and f.blocking}
        if rule not in found:
            missed.append(location.name)
    assert not missed, f"{path} passed at: {missed}"


def test_fraction_annotations_are_read_wherever_the_operator_copies_them_to_pods(engine):
    """KServe puts `spec.predictor.annotations` (and the InferenceService's own) on the pods; the notebook controller
    the Notebook's. Every location with pod metadata, or metadata an operator copies, is tried."""
    facts, missed = untrusted_facts(), []
    for location in locations():
        if not location.has_metadata:
            continue
        obj = location.build({"containers": [container(resources=GPU_RESOURCES)]}, namespace="tenant",
                             pod_annotations={"gpu-fraction": "0.5"})
        found = {f.rule for f in engine.evaluate(Resource(obj), facts).findings if f.blocking}
        if "no-fractional-gpu" not in found:
            missed.append(location.name)
    assert not missed, f"a gpu-fraction annotation passed at: {missed}"
    isvc = first_location("serving.kserve.io", "InferenceService").build(
        {"containers": [container(resources=GPU_RESOURCES)]}, namespace="tenant")
    isvc["metadata"]["annotations"] = {"gpu-fraction": "0.25"}  # the object's own: KServe copies it too
    assert "no-fractional-gpu" in {f.rule for f in engine.evaluate(Resource(isvc), facts).findings if f.blocking}


# ------------------------------------------------------------------------------------------------ exceptions
def test_default_exceptions_name_exact_namespaces():
    with open(DEFAULT_CONFIG_FILE, encoding="utf-8") as handle:
        exceptions = yaml.safe_load(handle)["exceptions"]
    for exception in exceptions:
        for namespace in exception["namespaces"]:
            assert not any(c in namespace for c in "*?[]"), f"{exception['name']}: glob {namespace!r}"


@pytest.mark.parametrize("namespace", ["alice-monitoring", "nvidia-evil", "gpu-operator-x", "amd-gpu-tenant",
                                       "habana-lab", "neuron-team", "intel-gpu-fun"])
def test_a_tenant_namespace_named_like_a_device_agent_gets_device_checks(engine, namespace):
    spec, rule, _ = ENV_PATHS["env all, no device"]
    pod = first_location("", "Pod").build(spec, namespace=namespace)
    assert rule in devices_denials(engine, pod, OfflineFacts([]))
