"""Invariants (a) and (c): nothing an object or its creator controls lowers its scrutiny; a derived object is checked
as strictly as if the tenant had written it, unless this webhook checked its whole content at the same tier.

Generated from webhook/k8s/kinds.yaml: every owner kind of the table against every child kind, the owners that
derive nothing (Volcano's JobFlow and JobTemplate, a kind of a made-up group), labels and annotations on the
object and on every pod template. The escape is the issue's: privileged, hostPID, host root, a time-sliced GPU,
no sandbox, in an untrusted namespace, created by a trusted controller's identity.
"""

import pytest

from serverproc import make_review
from templates import first_location, judges, locations, untrusted_facts
from webhook.app import admission
from webhook.engine.core import Engine
from webhook.k8s.kindnames import table_data
from webhook.k8s.provenance import derivations, kind_name
from webhook.k8s.workload import Classification, build_workload, kind_table
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource

IMAGE = "registry.example/x@sha256:" + "a" * 64
CONTROLLER = "system:serviceaccount:volcano-system:volcano-controllers"  # a default trusted controller
ESCAPE = {"hostPID": True, "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
          "containers": [{"name": "c", "image": IMAGE, "securityContext": {"privileged": True},
                          "volumeMounts": [{"name": "root", "mountPath": "/host"}],
                          "resources": {"requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                                        "limits": {"memory": "1Gi", "nvidia.com/gpu.shared": 1}}}]}
CHILD_KINDS = sorted({child for children in derivations().values() for child in children})


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


@pytest.fixture(scope="module")
def facts():
    return untrusted_facts()


def child_location(name):
    kind, _, group = name.partition(".")
    return first_location(group, kind)


def owner_ref(group, kind):
    return {"apiVersion": f"{group}/v1" if group else "v1", "kind": kind, "name": "owner", "uid": "u-1",
            "controller": True}


def outcome_of(engine, facts, obj, username=CONTROLLER):
    return admission.validate(engine, make_review(obj, username=username)["request"], facts)


def test_the_issue_volcano_jobflow_job_is_denied(engine, facts):
    job = first_location("batch.volcano.sh", "Job").build(ESCAPE, namespace="tenant",
                                                          owner=owner_ref("flow.volcano.sh", "JobFlow"))
    outcome = outcome_of(engine, facts, job)
    assert not outcome.response["allowed"]
    assert {"untrusted-hardening", "untrusted-sandbox", "untrusted-gpu-isolation"} <= set(outcome.denied_policies)


@pytest.mark.parametrize("child", CHILD_KINDS)
def test_a_child_is_trusted_only_from_an_owner_that_derives_it_wholly(engine, facts, child):
    """Lowered for the table's owners of `child`; denied for every other owner kind of the table, for the same kind
    in another group, for owners the table does not know and for owners that derive it only in part."""
    location = child_location(child)
    lowered, strict = [], []
    owners = [(key, child in derived) for key, derived in derivations().items()]
    owners += [(key, False) for key in kind_table() if key not in derivations()]  # cluster-scoped
    owners += [(("flow.volcano.sh", "JobFlow"), False), (("flow.volcano.sh", "JobTemplate"), False),
               (("evil.example", "Deployment"), False), (("apps", "Deploymnet"), False)]
    for (group, kind), derives in owners:
        obj = location.build(ESCAPE, namespace="tenant", owner=owner_ref(group, kind))
        allowed = outcome_of(engine, facts, obj).response["allowed"]
        if allowed != derives:
            (strict if derives else lowered).append(kind_name(group, kind))
    assert not lowered, f"{child} lowered for owners that do not derive it wholly: {lowered}"
    assert not strict, f"{child} denied though its owner's check covers it: {strict}"


def test_trust_needs_the_trusted_identity_and_a_create(engine, facts):
    pod = first_location("", "Pod").build(ESCAPE, namespace="tenant", owner=owner_ref("batch.volcano.sh", "Job"))
    assert outcome_of(engine, facts, pod).response["allowed"]
    assert not outcome_of(engine, facts, pod, username="alice@example.com").response["allowed"]
    update = admission.validate(engine, make_review(pod, "UPDATE", None, username=CONTROLLER)["request"], facts)
    assert not update.response["allowed"]


@pytest.mark.parametrize("partly", ["TrainJob.trainer.kubeflow.org", "InferenceService.serving.kserve.io",
                                    "LLMInferenceService.serving.kserve.io"])
def test_what_a_controller_merges_from_a_runtime_is_judged_whole_in_its_namespace(engine, facts, partly):
    """A TrainJob's JobSet is its (Cluster)TrainingRuntime's template, which was checked with no tier; KServe's
    Deployments merge a (Cluster)ServingRuntime: judged in the namespace's tier as if the tenant had written them."""
    kind, _, group = partly.partition(".")
    partial = {entry["kind"]: entry.get("derivesPartly") for entry in table_data()["kinds"]}[kind]
    assert partial, f"{partly} lists what it derives in part"
    for child in partial:
        obj = child_location(child).build(ESCAPE, namespace="tenant", owner=owner_ref(group, kind))
        outcome = outcome_of(engine, facts, obj, username="system:serviceaccount:kserve:kserve-controller-manager")
        assert "untrusted-hardening" in outcome.denied_policies, (partly, child)


# ------------------------------------------------------------------------------------------------ labels and roles
SELF_SAID = {"aiadmit.dev/tier": "trusted", "aiadmit.dev/role": "training", "aiadmit.dev/exempt": "untrusted-hardening"}


def test_nothing_the_object_or_a_template_says_lowers_its_tier_at_any_location(engine, facts):
    """(TrainJob is not hardened itself: its pods are its runtime's, judged in the JobSet Trainer makes, above.)"""
    missed = []
    hardening = engine.by_id["untrusted-hardening"]
    for location in locations():
        obj = location.build(ESCAPE, namespace="tenant", labels=SELF_SAID, pod_labels=SELF_SAID,
                             pod_annotations=SELF_SAID)
        obj["metadata"]["annotations"] = dict(SELF_SAID)
        evaluation = engine.evaluate(Resource(obj), facts)
        if "untrusted" not in evaluation.classes or (judges(hardening, location.kind.kind) and not any(
                f.policy == "untrusted-hardening" and f.blocking for f in evaluation.findings)):
            missed.append(location.name)
    assert not missed, f"self-declared labels lowered scrutiny at: {missed}"


@pytest.mark.parametrize("key", sorted(k for k, spec in kind_table().items() if spec.role))
def test_a_role_label_never_overrides_a_kinds_fixed_role(key):
    spec = kind_table()[key]
    location = first_location(*key)
    for label in ("training", "inference", "notebook"):
        obj = location.build({"containers": [{"name": "c", "image": IMAGE}]}, labels={"aiadmit.dev/role": label})
        workload = build_workload(Resource(obj), Classification())
        assert workload.role == spec.role, (spec.kind, label, workload.role)


def test_a_role_label_still_names_the_role_of_a_kind_that_only_guesses(engine):
    deployment = first_location("apps", "Deployment").build(
        {"containers": [{"name": "c", "image": IMAGE, "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        labels={"aiadmit.dev/role": "training"})
    assert build_workload(Resource(deployment), Classification()).role == "training"


def test_a_pytorchjob_labelled_inference_may_not_take_a_serving_class(engine):
    job = first_location("kubeflow.org", "PyTorchJob").build(
        {"priorityClassName": "ai-inference-critical",
         "containers": [{"name": "c", "image": IMAGE, "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        labels={"aiadmit.dev/role": "inference"})
    found = [f for f in engine.evaluate(Resource(job), OfflineFacts([])).findings if f.policy == "priority-class"]
    assert [(f.rule, f.result) for f in found] == [("allowed", "fail")], found


@pytest.mark.parametrize("location", [l for l in locations() if l.has_pod_spec], ids=lambda l: l.name)
def test_an_untrusted_cpu_only_workload_may_not_take_any_priority_class(engine, facts, location):
    spec = {"priorityClassName": "ai-inference-critical", "containers": [{"name": "c", "image": IMAGE}]}
    obj = location.build(spec, namespace="tenant")
    rules = {f.rule for f in engine.evaluate(Resource(obj), facts).findings
             if f.policy == "priority-class" and f.blocking}
    if location.kind.kind in ("TrainJob", "ServingRuntime", "ClusterServingRuntime"):
        assert not rules  # excluded: the class belongs to the runtime / the InferenceService predictor
    else:
        assert "allowed" in rules, rules
    if location.kind.role is None:  # not an AI workload: it need not name a class (an AI workload must)
        unset = location.build({"containers": [{"name": "c", "image": IMAGE}]}, namespace="tenant")
        assert not [f for f in engine.evaluate(Resource(unset), facts).findings
                    if f.policy == "priority-class" and f.blocking]
