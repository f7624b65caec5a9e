"""webhook/inputs/livefacts.py: cache bookkeeping with real Kubernetes objects, staleness, and a real failing transport.

The objects are built with the kubernetes client's own models and serialised by
its ApiClient, exactly as list and watch responses arrive (camelCase JSON).
"""

import time

from kubernetes import client

from serverproc import make_review
from webhook.app import admission
from webhook.inputs import review as reviews
from webhook.engine.core import Engine
from webhook.inputs.livefacts import LiveFacts, slim_workload
from webhook.language.bundle import BUILTIN_POLICY_DIR

API = client.ApiClient()


def wire(model) -> dict:
    return API.sanitize_for_serialization(model)


def meta(name, namespace=None, labels=None, rv="1"):
    return client.V1ObjectMeta(name=name, namespace=namespace, labels=labels, resource_version=rv)


class Clock:
    """A settable monotonic clock for staleness (the caches take it as a parameter)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def synced_facts(clock=None):
    facts = LiveFacts(max_age=60, clock=clock or time.monotonic)
    facts.caches["namespaces"].replace([
        wire(client.V1Namespace(metadata=meta("ml", labels={"aiadmit.dev/enforcement": "warn"}))),
        wire(client.V1Namespace(metadata=meta("empty")))], "10")
    facts.caches["resourcequotas"].replace([wire(client.V1ResourceQuota(
        metadata=meta("gpus", "ml"), spec=client.V1ResourceQuotaSpec(hard={"requests.nvidia.com/gpu": "8"})))], "11")
    facts.caches["priorityclasses"].replace([wire(client.V1PriorityClass(metadata=meta("ai-batch"), value=1000))],
                                            "12")
    facts.caches["runtimeclasses"].replace([wire(client.V1RuntimeClass(metadata=meta("gvisor"), handler="runsc"))],
                                           "13")
    facts.caches["nodes"].replace([wire(client.V1Node(metadata=meta("n1", labels={"nvidia.com/gpu.present": "true"})))],
                                  "14")
    facts.caches["localqueues"].replace([], None)  # Kueue not installed (the API served 404)
    facts.caches["podgroups"].replace([], None)  # scheduling.k8s.io PodGroups not served (off by default)
    facts.caches["resourceclaims"].replace([], "15")  # DRA: none yet (tests/test_dra.py fills them)
    facts.caches["resourceclaimtemplates"].replace([], "16")
    facts.caches["deviceclasses"].replace([], "17")  # none names an extended resource (test_live_deviceclasses.py)
    container = client.V1Container(
        name="vllm", image="vllm/vllm-openai:v0.6.0", command=["python3", "-m", "vllm"],
        env=[client.V1EnvVar(name="HF_TOKEN", value="hf_secret")],
        resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}))
    deployment = client.V1Deployment(
        api_version="apps/v1", kind="Deployment", metadata=meta("llm", "ml"),
        spec=client.V1DeploymentSpec(
            replicas=2, selector=client.V1LabelSelector(match_labels={"app": "llm"}),
            template=client.V1PodTemplateSpec(metadata=client.V1ObjectMeta(labels={"app": "llm"}),
                                              spec=client.V1PodSpec(containers=[container]))))
    facts.caches["deployments"].replace([wire(deployment)], "14")
    facts.caches["statefulsets"].replace([], "15")
    facts.caches["configmaps"].replace([wire(client.V1ConfigMap(metadata=meta("env", "ml"), data={"A": "1"}))], "16")
    return facts


def test_facts_from_synced_caches():
    facts = synced_facts()
    assert facts.synced()
    assert facts.namespace_labels("ml") == {"aiadmit.dev/enforcement": "warn"}
    assert facts.namespace_labels("empty") == {} and facts.namespace_labels("nowhere") is None
    [quota] = facts.resource_quotas("ml")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"} and quota["kind"] == "ResourceQuota"
    assert facts.resource_quotas("empty") == []
    assert list(facts.priority_classes()) == ["ai-batch"] and facts.priority_classes()["ai-batch"]["value"] == 1000
    assert facts.runtime_classes() == ["gvisor"]
    target = facts.find("ml", "Deployment", "llm")
    assert target.kind == "Deployment" and target.name == "llm"
    containers = target.obj["spec"]["template"]["spec"]["containers"]
    assert containers == [{"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    assert "hf_secret" not in str(target.obj)  # the slim projection keeps no env, command or image
    assert facts.find("ml", "StatefulSet", "llm") is None and facts.find("ml", "RayService", "llm") is None


def test_watch_events_update_the_caches():
    facts = synced_facts()
    namespaces = facts.caches["namespaces"]
    namespaces.apply("ADDED", wire(client.V1Namespace(metadata=meta("new", labels={"a": "b"}, rv="20"))))
    namespaces.apply("MODIFIED", wire(client.V1Namespace(metadata=meta("ml", labels={}, rv="21"))))
    namespaces.apply("DELETED", wire(client.V1Namespace(metadata=meta("empty", rv="22"))))
    namespaces.apply("BOOKMARK", {"kind": "Namespace", "metadata": {"resourceVersion": "30"}})
    assert facts.namespace_labels("new") == {"a": "b"} and facts.namespace_labels("ml") == {}
    assert facts.namespace_labels("empty") is None
    assert namespaces.resource_version == "30"
    quotas = facts.caches["resourcequotas"]
    quotas.apply("DELETED", wire(client.V1ResourceQuota(metadata=meta("gpus", "ml", rv="31"))))
    assert facts.resource_quotas("ml") == []


def test_unsynced_or_stale_caches_answer_unknown():
    clock = Clock()
    facts = LiveFacts(max_age=60, clock=clock)
    assert not facts.synced() and facts.namespace_labels("ml") is None and facts.priority_classes() is None
    facts = synced_facts(clock)
    assert facts.resource_quotas("ml") is not None
    clock.now += 61
    assert facts.resource_quotas("ml") is None and facts.runtime_classes() is None
    assert facts.namespace_labels("ml") is None and facts.find("ml", "Deployment", "llm") is None
    assert facts.synced()  # synced once: still ready, but the stale facts are unknown
    assert all(age > 60 for age in facts.ages().values())
    facts.caches["runtimeclasses"].apply("BOOKMARK", {"metadata": {"resourceVersion": "99"}})
    assert facts.runtime_classes() == ["gvisor"] and facts.resource_quotas("ml") is None


def test_the_engine_reads_live_facts_and_skips_when_they_are_stale():
    clock = Clock()
    facts = synced_facts(clock)
    engine = Engine.load([BUILTIN_POLICY_DIR])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    request = reviews.parse(__import__("json").dumps(make_review(pod)).encode())
    outcome = admission.validate(engine, request, facts)
    assert outcome.response["allowed"] is True  # namespace ml is labelled warn: every deny lowered
    assert outcome.response["warnings"]
    clock.now += 3600
    stale = admission.validate(engine, request, facts)
    assert stale.response["allowed"] is False  # label unknown: nothing lowered


def test_slim_workload_survives_odd_shapes():
    assert slim_workload({"kind": "Deployment", "metadata": {"name": "x"}})["spec"]["template"]["spec"] == {
        "containers": []}


def test_unreachable_api_server_leaves_facts_unknown_and_keeps_retrying():
    configuration = client.Configuration()
    configuration.host = "https://127.0.0.1:1"  # nothing listens on port 1
    configuration.verify_ssl = True
    facts = LiveFacts(client.ApiClient(configuration), max_age=5).start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(c.failures for c in facts.caches.values()):
            time.sleep(0.1)
        assert all(c.failures >= 1 for c in facts.caches.values())
        assert not facts.synced() and facts.namespace_labels("ml") is None and facts.resource_quotas("ml") is None
    finally:
        facts.stop()
