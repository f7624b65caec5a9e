"""DRA devices (webhook/k8s/dra.py) as the engine reads them: claims and templates, who uses a claim, and the facts
that know them (the audit input, live caches fed with the kubernetes client's own models).

The policy-level behaviour (floors, quota keys, isolation, admin access, the claims themselves) is in the policy
test cases under tests/policies (dra-claims/ and the dra*.yaml files of each policy).
"""

import json

import pytest
from kubernetes import client

from serverproc import make_review
from webhook.app import admission
from webhook.engine.core import Engine
from webhook.inputs import review as reviews
from webhook.inputs.livefacts import LiveFacts
from webhook.inputs.sources import load_text
from webhook.k8s import dra
from webhook.k8s.workload import Classification
from webhook.model.facts import NoFacts, OfflineFacts
from webhook.model.resource import Resource

API = client.ApiClient()
CLASSES = Classification().device_classes
DIGEST = "@sha256:" + "0" * 64


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


def wire(model) -> dict:
    return API.sanitize_for_serialization(model)


def claim_model(name, namespace, requests, reserved=(), config=None):
    return wire(client.ResourceV1ResourceClaim(
        api_version="resource.k8s.io/v1", kind="ResourceClaim",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        spec=client.V1ResourceClaimSpec(devices=client.V1DeviceClaim(requests=requests, config=config)),
        status=client.V1ResourceClaimStatus(reserved_for=[
            client.V1ResourceClaimConsumerReference(resource="pods", name=p, uid=f"uid-{p}") for p in reserved])))


def exactly(name, device_class, **fields):
    return client.V1DeviceRequest(name=name, exactly=client.V1ExactDeviceRequest(device_class_name=device_class,
                                                                                 **fields))


def pod(name, namespace, claims, uses, labels=None, cpu="8"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"resourceClaims": claims, "containers": [{
                "name": "main", "image": "registry.example.com/job" + DIGEST,
                "resources": {"requests": {"cpu": cpu, "memory": "64Gi", "ephemeral-storage": "1Gi"},
                              "limits": {"memory": "64Gi"}, "claims": [{"name": u} for u in uses]}}]}}


# ---------------------------------------------------------------------- what a claim asks for
def test_counts_all_first_available_capacity_and_sharing_per_request():
    devices = {"requests": [
        {"name": "four", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4}},
        {"name": "every", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}},
        {"name": "either", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
                                              {"name": "nic", "deviceClassName": "rdma.example.com", "count": 1},
                                              {"name": "slice", "deviceClassName": "mig.nvidia.com", "count": 3}]},
        {"name": "part", "exactly": {"deviceClassName": "gpu.nvidia.com", "capacity": {"requests": {"memory": "8Gi"}}}},
        {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com"}},
        {"name": "watch", "exactly": {"deviceClassName": "gpu.nvidia.com", "adminAccess": True}},
    ], "config": [{"requests": ["four"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "MPS"}}}}]}
    got = {r["request"]: r for r in dra.requests(devices, CLASSES)}
    assert (got["four"]["count"], got["four"]["all"], got["four"]["sharing"]) == (4, False, "MPS")
    assert (got["every"]["count"], got["every"]["all"], got["every"]["sharing"]) == (1, True, "")
    # the smallest accelerator alternative; a NIC alternative is no device
    assert got["either"]["count"] == 2 and got["either"]["firstAvailable"]
    assert got["either"]["acceleratorClasses"] == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert got["part"]["capacity"] == {"memory": "8Gi"}
    assert not got["nic"]["accelerator"] and got["nic"]["acceleratorClasses"] == []
    assert got["watch"]["adminAccess"] and not got["four"]["adminAccess"]


def test_a_config_without_requests_shares_every_request():
    devices = {"requests": [{"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
               "config": [{"opaque": {"driver": "gpu.nvidia.com",
                                      "parameters": {"kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}}}]}
    assert [r["sharing"] for r in dra.requests(devices, CLASSES)] == ["TimeSlicing"]


def test_a_container_gets_only_the_request_it_names():
    template = {"kind": "ResourceClaimTemplate", "spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
        {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com"}}]}}}}
    known = {"ResourceClaimTemplate": {"t": template}, "ResourceClaim": {}, "users": {}}
    spec = {"resourceClaims": [{"name": "c", "resourceClaimTemplateName": "t"}]}
    whole = dra.resolve(spec, {"resources": {"claims": [{"name": "c"}]}}, known, CLASSES)
    only_nic = dra.resolve(spec, {"resources": {"claims": [{"name": "c", "request": "nic"}]}}, known, CLASSES)
    assert [e["request"] for e in whole] == ["gpu", "nic"] and [e["request"] for e in only_nic] == ["nic"]
    unknown = dra.resolve(spec, {"resources": {"claims": [{"name": "c"}]}}, None, CLASSES)
    assert [(e["found"], e["object"], e["source"]) for e in unknown] == [(False, "t", "ResourceClaimTemplate")]


# ---------------------------------------------------------------------- input errors
def test_a_claim_the_pod_does_not_declare_is_an_input_error_and_the_rest_is_checked(engine):
    obj = pod("p", "ml", [{"name": "gpu", "resourceClaimTemplateName": "t"}], ["gpu", "gpus"], cpu="0")
    evaluation = engine.evaluate(Resource(obj), NoFacts())
    [error] = evaluation.errors
    assert error.message == ("spec.containers[0].resources.claims[1]: resources.claims[1] names claim 'gpus', which "
                             "the pod does not declare in spec.resourceClaims (gpu)")
    assert any(f.policy == "resources-declared" and f.rule == "cpu-request" for f in evaluation.findings)


def test_odd_claim_shapes_are_input_errors_or_nothing_never_a_crash(engine):
    obj = pod("p", "ml", [{"name": "gpu", "resourceClaimTemplateName": "t"}], [])
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": ["gpu"]}, "gpu"]
    obj["spec"]["resourceClaims"].append("not a map")
    [error] = engine.evaluate(Resource(obj), NoFacts()).errors
    assert "resources.claims[0] names claim ['gpu']" in error.message
    odd = {"kind": "ResourceClaim", "spec": {"devices": {"requests": "gpu", "config": [{"opaque": "x"}, 3]}}}
    assert dra.requests(dra.claim_devices(odd), CLASSES) == []


def test_declared_claims_are_no_error(engine):
    obj = pod("p", "ml", [{"name": "gpu", "resourceClaimTemplateName": "t"}], ["gpu"])
    assert not engine.evaluate(Resource(obj), NoFacts()).errors


# ---------------------------------------------------------------------- who uses a claim: the audit input
def test_the_audit_input_knows_claims_their_users_and_only_its_namespaces():
    text = """
apiVersion: v1
kind: Namespace
metadata: {name: empty}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: t}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: t}
spec:
  template:
    spec:
      resourceClaims: [{name: g, resourceClaimName: shared}]
      containers: [{name: c, image: x, resources: {claims: [{name: g}]}}]
"""
    facts = OfflineFacts(load_text(text, "in.yaml").resources)
    known = facts.resource_claims("t")
    assert list(known["ResourceClaim"]) == ["shared"] and known["users"] == {"shared": ["Job/j"]}
    assert facts.resource_claims("empty") == {"ResourceClaim": {}, "ResourceClaimTemplate": {}, "users": {}}
    assert facts.resource_claims("elsewhere") is None


# ---------------------------------------------------------------------- live caches
def live_facts():
    facts = LiveFacts(max_age=60)
    facts.caches["resourceclaims"].replace([
        claim_model("shared", "tenant", [exactly("gpu", "gpu.nvidia.com")], reserved=["other-pod", "web-7d9-x2"]),
        claim_model("mine", "tenant", [exactly("gpu", "gpu.nvidia.com")], reserved=["web-7d9-x2"]),
    ], "20")
    facts.caches["resourceclaimtemplates"].replace([wire(client.V1ResourceClaimTemplate(
        api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate",
        metadata=client.V1ObjectMeta(name="four", namespace="tenant"),
        spec=client.V1ResourceClaimTemplateSpec(spec=client.V1ResourceClaimSpec(devices=client.V1DeviceClaim(
            requests=[exactly("gpu", "gpu.nvidia.com", count=4)])))))], "21")
    facts.caches["deployments"].replace([], "22")
    facts.caches["statefulsets"].replace([], "23")
    return facts


def test_live_claims_keep_spec_and_who_holds_them():
    facts = live_facts()
    known = facts.resource_claims("tenant")
    assert known["users"] == {"shared": ["Pod/other-pod", "Pod/web-7d9-x2"], "mine": ["Pod/web-7d9-x2"]}
    assert known["ResourceClaimTemplate"]["four"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 4
    assert set(known["ResourceClaim"]["shared"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    facts.caches["resourceclaims"].confirmed -= 120  # stale: unknown, never "no claims"
    assert facts.resource_claims("tenant") is None


def test_live_a_claim_held_only_by_the_workloads_own_pods_is_not_shared(engine):
    facts = live_facts()
    spec = {"containers": [{"name": "m", "image": "x" + DIGEST, "resources": {"claims": [{"name": "g"}]}}]}
    for claim, others in (("mine", []), ("shared", ["Pod/other-pod"])):
        spec["resourceClaims"] = [{"name": "g", "resourceClaimName": claim}]
        [entry] = dra.resolve(spec, spec["containers"][0], facts.resource_claims("tenant"), CLASSES, "Deployment/web")
        assert entry["users"] == others


def test_live_shared_claim_denies_an_untrusted_pod(engine):
    facts = live_facts()
    facts.caches["namespaces"].replace([{"metadata": {"name": "tenant", "labels": {"aiadmit.dev/tier": "untrusted"}}}],
                                       "24")
    obj = pod("mine-too", "tenant", [{"name": "g", "resourceClaimName": "shared"}], ["g"])
    findings = [f for f in engine.evaluate(Resource(obj), facts).findings if f.policy == "untrusted-gpu-isolation"]
    assert [(f.rule, f.result) for f in findings] == [("no-shared-claims", "fail")]
    assert "also used by Pod/other-pod, Pod/web-7d9-x2" in findings[0].message


# ---------------------------------------------------------------------- the config names accelerator classes
def test_the_config_decides_which_device_classes_are_accelerators(tmp_path, engine):
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\n"
                      "classification:\n  acceleratorDeviceClasses: [rdma.example.com]\n")
    widened = Engine.load(config_path=str(config))
    text = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: nic, namespace: ml}
spec: {spec: {devices: {requests: [{name: nic, exactly: {deviceClassName: rdma.example.com, count: 3}}]}}}
"""
    obj = pod("p", "ml", [{"name": "n", "resourceClaimTemplateName": "nic"}], ["n"], cpu="1")
    resources = load_text(text, "c.yaml").resources + [Resource(obj)]
    facts = OfflineFacts(resources)

    def floors(which):
        return [f.message for f in which.evaluate(Resource(obj), facts).findings if f.rule == "cpu-per-device"]
    assert floors(engine) == []
    assert floors(widened) == ["container main requests 1 cpu for 3 device(s); at least 1 per device keeps the "
                               "accelerator fed"]


# ---------------------------------------------------------------------- docs/policies.md says how each reads them
def test_every_builtin_policy_says_how_it_reads_dra_devices(engine):
    from webhook.app.commands.policies import markdown

    text = markdown(sorted(engine.by_id.values(), key=lambda p: p.id))
    for policy in engine.policies:
        assert policy.document.get("forms", {}).get("dra"), f"{policy.id}: no forms.dra"
        section = text.split(f"\n## {policy.id}\n", 1)[1].split("\n## ", 1)[0]
        assert "### Kubernetes 1.35–1.37 forms" in section and "- **DRA devices**: " in section, policy.id


# ---------------------------------------------------------------------- the webhook's answers
def test_admission_of_claims_and_of_a_pod_naming_an_undeclared_claim(engine):
    facts = live_facts()
    facts.caches["namespaces"].replace([{"metadata": {"name": "tenant", "labels": {"aiadmit.dev/tier": "untrusted"}}},
                                        {"metadata": {"name": "ml"}}], "30")
    admin = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": "watch-all", "namespace": "ml"},
             "spec": {"spec": {"devices": {"requests": [{"name": "all", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "adminAccess": True}}]}}}}
    part = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "slice-of-memory", "namespace": "tenant"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "capacity": {"requests": {"memory": "10Gi"}}}}]}}}
    whole = dict(part, metadata={"name": "whole", "namespace": "tenant"},
                 spec={"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}})
    undeclared = pod("p", "ml", [], ["gpu"])

    def answer(obj):
        return admission.validate(engine, reviews.parse(json.dumps(make_review(obj)).encode()), facts).response
    for obj, says in ((admin, "asks for adminAccess (request all)"), (part, "part of a device's capacity"),
                      (undeclared, "names claim 'gpu', which the pod does not declare")):
        response = answer(obj)
        assert response["allowed"] is False and says in response["status"]["message"], response
    assert answer(whole)["allowed"] is True
