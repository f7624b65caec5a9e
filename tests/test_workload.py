"""Every kind of the catalogue: its pod templates are found, with pointers, pod counts and classes."""

import pytest

from webhook.model.resource import Resource
from webhook.k8s.workload import Classification, ShapeError, build_workload, kind_table

GPU = {"name": "main", "image": "img", "resources": {"limits": {"nvidia.com/gpu": 1}}}
CPU = {"name": "side", "image": "img"}


def pod(*containers, labels=None):
    template = {"spec": {"containers": [dict(c) for c in containers]}}
    if labels:
        template["metadata"] = {"labels": labels}
    return template


CASES = {
    # kind: (apiVersion, spec, expected template pointers -> pod count, classes)
    "Pod": ("v1", None, {"/spec": 1}, {"pod", "ai", "accelerated"}),
    "Deployment": ("apps/v1", {"replicas": 3, "template": pod(GPU)}, {"/spec/template/spec": 3},
                   {"pod", "ai", "accelerated", "inference"}),
    "StatefulSet": ("apps/v1", {"replicas": 2, "template": pod(GPU)}, {"/spec/template/spec": 2},
                    {"pod", "ai", "accelerated", "inference"}),
    "ReplicaSet": ("apps/v1", {"template": pod(GPU)}, {"/spec/template/spec": 1},
                   {"pod", "ai", "accelerated", "inference"}),
    "DaemonSet": ("apps/v1", {"template": pod(CPU)}, {"/spec/template/spec": 1}, {"pod"}),
    "Job": ("batch/v1", {"parallelism": 4, "template": pod(GPU)}, {"/spec/template/spec": 4},
            {"pod", "ai", "accelerated", "training"}),
    "CronJob": ("batch/v1", {"jobTemplate": {"spec": {"template": pod(GPU)}}},
                {"/spec/jobTemplate/spec/template/spec": 1}, {"pod", "ai", "accelerated", "training"}),
    "PyTorchJob": ("kubeflow.org/v1", {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": pod(GPU)}, "Worker": {"replicas": 3, "template": pod(GPU)}}},
        {"/spec/pytorchReplicaSpecs/Master/template/spec": 1, "/spec/pytorchReplicaSpecs/Worker/template/spec": 3},
        {"pod", "ai", "accelerated", "training"}),
    "TFJob": ("kubeflow.org/v1", {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": pod(CPU)}}},
              {"/spec/tfReplicaSpecs/Worker/template/spec": 2}, {"pod", "ai", "training"}),
    "MPIJob": ("kubeflow.org/v2beta1", {"mpiReplicaSpecs": {"Launcher": {"template": pod(CPU)},
                                                             "Worker": {"replicas": 2, "template": pod(GPU)}}},
               {"/spec/mpiReplicaSpecs/Launcher/template/spec": 1, "/spec/mpiReplicaSpecs/Worker/template/spec": 2},
               {"pod", "ai", "accelerated", "training"}),
    "XGBoostJob": ("kubeflow.org/v1", {"xgbReplicaSpecs": {"Master": {"template": pod(CPU)}}},
                   {"/spec/xgbReplicaSpecs/Master/template/spec": 1}, {"pod", "ai", "training"}),
    "PaddleJob": ("kubeflow.org/v1", {"paddleReplicaSpecs": {"Worker": {"replicas": 2, "template": pod(GPU)}}},
                  {"/spec/paddleReplicaSpecs/Worker/template/spec": 2}, {"pod", "ai", "accelerated", "training"}),
    "JAXJob": ("kubeflow.org/v1", {"jaxReplicaSpecs": {"Worker": {"replicas": 2, "template": pod(CPU)}}},
               {"/spec/jaxReplicaSpecs/Worker/template/spec": 2}, {"pod", "ai", "training"}),
    "Notebook": ("kubeflow.org/v1", {"template": {"spec": {"containers": [CPU]}}}, {"/spec/template/spec": 1},
                 {"pod", "ai", "notebook", "untrusted"}),
    "TrainJob": ("trainer.kubeflow.org/v1alpha1", {"runtimeRef": {"name": "torch"}, "trainer": {
        "image": "img", "numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}},
        {None: 4}, {"pod", "ai", "accelerated", "training"}),
    "TrainingRuntime": ("trainer.kubeflow.org/v1alpha1", {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": pod(GPU)}}}]}}},
        {"/spec/template/spec/replicatedJobs/0/template/spec/template/spec": 4},
        {"pod", "ai", "accelerated", "training"}),
    "ClusterTrainingRuntime": ("trainer.kubeflow.org/v1alpha1", {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": pod(CPU)}}}]}}},
        {"/spec/template/spec/replicatedJobs/0/template/spec/template/spec": 1}, {"pod", "ai", "training"}),
    "JobSet": ("jobset.x-k8s.io/v1alpha2", {"replicatedJobs": [
        {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4, "template": pod(GPU)}}}]},
        {"/spec/replicatedJobs/0/template/spec/template/spec": 8}, {"pod", "ai", "accelerated", "training"}),
    "RayCluster": ("ray.io/v1", {"headGroupSpec": {"template": pod(CPU)}, "workerGroupSpecs": [
        {"groupName": "gpu", "replicas": 3, "numOfHosts": 2, "template": pod(GPU)}]},
        {"/spec/headGroupSpec/template/spec": 1, "/spec/workerGroupSpecs/0/template/spec": 6},
        {"pod", "ai", "accelerated"}),  # no role of its own (the catalogue gives RayCluster none)
    "RayCronJob": ("ray.io/v1", {"schedule": "* * * * *", "jobTemplate": {"rayClusterSpec": {
        "headGroupSpec": {"template": pod(CPU)}, "workerGroupSpecs": [{"groupName": "w", "replicas": 2,
                                                                       "template": pod(GPU)}]}}},
        {"/spec/jobTemplate/rayClusterSpec/headGroupSpec/template/spec": 1,
         "/spec/jobTemplate/rayClusterSpec/workerGroupSpecs/0/template/spec": 2},
        {"pod", "ai", "accelerated", "training"}),
    "LLMInferenceService": ("serving.kserve.io/v1alpha2", {
        "replicas": 2, "template": {"containers": [GPU]}, "worker": {"containers": [GPU]},
        "prefill": {"replicas": 3, "template": {"containers": [GPU]}},
        "router": {"scheduler": {"replicas": 2, "template": {"containers": [CPU]}}}},
        {"/spec/template": 2, "/spec/worker": 2, "/spec/prefill/template": 3, "/spec/router/scheduler/template": 2},
        {"pod", "ai", "accelerated", "inference"}),
    "Job.batch.volcano.sh": ("batch.volcano.sh/v1alpha1", {"minAvailable": 3, "schedulerName": "volcano", "tasks": [
        {"name": "ps", "replicas": 1, "template": pod(CPU)}, {"name": "worker", "replicas": 2, "template": pod(GPU)}]},
        {"/spec/tasks/0/template/spec": 1, "/spec/tasks/1/template/spec": 2},
        {"pod", "ai", "accelerated", "training"}),
    "RayJob": ("ray.io/v1", {"rayClusterSpec": {"headGroupSpec": {"template": pod(CPU)}, "workerGroupSpecs": [
        {"groupName": "w", "replicas": 2, "template": pod(GPU)}]}, "submitterPodTemplate": pod(CPU)},
        {"/spec/rayClusterSpec/headGroupSpec/template/spec": 1, "/spec/rayClusterSpec/workerGroupSpecs/0/template/spec": 2,
         "/spec/submitterPodTemplate/spec": 1}, {"pod", "ai", "accelerated", "training"}),
    "RayService": ("ray.io/v1", {"rayClusterConfig": {"headGroupSpec": {"template": pod(CPU)}, "workerGroupSpecs": [
        {"groupName": "w", "replicas": 1, "template": pod(GPU)}]}},
        {"/spec/rayClusterConfig/headGroupSpec/template/spec": 1,
         "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec": 1}, {"pod", "ai", "accelerated", "inference"}),
    "InferenceService": ("serving.kserve.io/v1beta1", {"predictor": {
        "minReplicas": 2, "model": {"modelFormat": {"name": "huggingface"},
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}}},
        "transformer": {"containers": [CPU]},
        "canary": [{"trafficPercent": 10, "predictor": {"minReplicas": 1, "model": {
            "modelFormat": {"name": "huggingface"}, "resources": {"limits": {"nvidia.com/gpu": 1}}}}}]},
        {"/spec/predictor": 2, "/spec/transformer": 1, "/spec/canary/0/predictor": 1},
        {"pod", "ai", "accelerated", "inference"}),
    "ServingRuntime": ("serving.kserve.io/v1alpha1", {"containers": [CPU]}, {"/spec": 1}, {"pod", "ai", "inference"}),
    "ClusterServingRuntime": ("serving.kserve.io/v1alpha1", {"containers": [GPU]}, {"/spec": 1},
                              {"pod", "ai", "accelerated", "inference"}),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io/v1", {"replicas": 2, "leaderWorkerTemplate": {
        "size": 4, "leaderTemplate": pod(GPU), "workerTemplate": pod(GPU)}},
        {"/spec/leaderWorkerTemplate/leaderTemplate/spec": 2, "/spec/leaderWorkerTemplate/workerTemplate/spec": 6},
        {"pod", "ai", "accelerated", "inference"}),
    # LWS v0.9's DisaggregatedSet: an LWS spec per role; a role without a leader template runs its leader from the
    # worker template (size pods per group there).
    "DisaggregatedSet": ("disaggregatedset.x-k8s.io/v1", {"roles": [
        {"name": "prefill", "spec": {"replicas": 2, "leaderWorkerTemplate": {
            "size": 4, "leaderTemplate": pod(GPU), "workerTemplate": pod(GPU)}}},
        {"name": "decode", "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 2, "workerTemplate": pod(GPU)}}}]},
        {"/spec/roles/0/spec/leaderWorkerTemplate/leaderTemplate/spec": 2,
         "/spec/roles/0/spec/leaderWorkerTemplate/workerTemplate/spec": 6,
         "/spec/roles/1/spec/leaderWorkerTemplate/workerTemplate/spec": 6},
        {"pod", "ai", "accelerated", "inference"}),
    "CronJob.batch.volcano.sh": ("batch.volcano.sh/v1alpha1", {"schedule": "0 * * * *", "jobTemplate": {"spec": {
        "tasks": [{"name": "worker", "replicas": 2, "template": pod(GPU)}]}}},
        {"/spec/jobTemplate/spec/tasks/0/template/spec": 2}, {"pod", "ai", "accelerated", "training"}),
    "JobTemplate": ("flow.volcano.sh/v1alpha1", {"tasks": [{"name": "worker", "replicas": 3, "template": pod(GPU)}]},
                    {"/spec/tasks/0/template/spec": 3}, {"pod", "ai", "accelerated", "training"}),
    # A JobFlow's patch of a JobTemplate's tasks: the patched pod spec is what the flow adds to the pods.
    "JobFlow": ("flow.volcano.sh/v1alpha1", {"flows": [{"name": "train", "patch": {"jobSpec": {"tasks": [
        {"name": "worker", "replicas": 2, "template": pod(GPU)}]}}}]},
        {"/spec/flows/0/patch/jobSpec/tasks/0/template/spec": 2}, {"pod", "ai", "accelerated", "training"}),
    "ReplicationController": ("v1", {"replicas": 2, "template": pod(CPU)}, {"/spec/template/spec": 2}, {"pod"}),
    "PodTemplate": ("v1", None, {"/template/spec": 1}, {"pod"}),
}


def make(case):
    api_version, spec, _, _ = CASES[case]
    kind = case.split(".")[0]  # "Job.batch.volcano.sh": a kind whose name another group uses too
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "ml"}}
    if kind == "Pod":
        obj["spec"] = {"containers": [dict(GPU)]}
    elif kind == "PodTemplate":
        obj["template"] = pod(CPU)
    else:
        obj["spec"] = spec
    return Resource(obj)


def test_every_kind_of_the_table_is_covered_here():
    assert {kind for _, kind in kind_table()} == {case.split(".")[0] for case in CASES}
    assert len(kind_table()) == len(CASES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_templates_pointers_counts_and_classes(kind):
    workload = build_workload(make(kind), Classification())
    expected = CASES[kind][2]
    assert {t.spec_pointer: t.pod_count for t in workload.templates} == expected
    assert workload.classes == frozenset(CASES[kind][3])
    for template in workload.templates:
        for container in template.containers:
            assert container.pointer.startswith(template.spec_pointer or "/spec/trainer")


def test_inference_service_model_is_the_main_container():
    workload = build_workload(make("InferenceService"), Classification())
    predictor = workload.templates[0]
    assert [(c.section, c.pointer) for c in predictor.containers] == [("model", "/spec/predictor/model")]


def test_trainjob_trainer_is_a_container_with_renamed_resources():
    workload = build_workload(make("TrainJob"), Classification())
    [template] = workload.templates
    [trainer] = template.containers
    assert template.spec is None and trainer.obj["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert trainer.field_pointer("/resources/requests/cpu") == "/spec/trainer/resourcesPerNode/requests/cpu"
    assert trainer.field_pointer("/resources/limits/nvidia.com~1gpu") == \
        "/spec/trainer/resourcesPerNode/limits/nvidia.com~1gpu"
    assert trainer.field_pointer("/image") == "/spec/trainer/image" and trainer.field_pointer("") == "/spec/trainer"


def test_field_pointers_of_ordinary_containers_keep_escaped_tokens():
    workload = build_workload(make("PyTorchJob"), Classification())
    container = workload.templates[0].containers[0]
    assert not container.rename
    assert container.field_pointer("/resources/limits/nvidia.com~1gpu") == \
        container.pointer + "/resources/limits/nvidia.com~1gpu"
    assert container.field_pointer("") == container.pointer


def test_unknown_kind_bears_no_pods():
    assert build_workload(Resource({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}), Classification()) is None


def test_same_kind_name_in_another_group_is_not_confused():
    # Not the table's apps Deployment (no inference role from the table), yet its pod template is found by shape.
    obj = {"apiVersion": "example.com/v1", "kind": "Deployment", "metadata": {}, "spec": {"template": pod(GPU)}}
    workload = build_workload(Resource(obj), Classification())
    assert workload.unlisted == "Deployment (example.com)"
    assert workload.classes == {"pod", "accelerated", "ai"}
    assert [t.spec_pointer for t in workload.templates] == ["/spec/template/spec"]


@pytest.mark.parametrize("labels, namespace_labels, expected", [
    ({"aiadmit.dev/role": "inference"}, None, {"pod", "ai", "inference"}),
    ({"aiadmit.dev/tier": "untrusted"}, None, {"pod", "untrusted"}),
    ({}, {"aiadmit.dev/tier": "untrusted"}, {"pod", "untrusted"}),
    ({"notebook-name": "nb"}, None, {"pod", "ai", "notebook", "untrusted"}),
    ({}, None, {"pod"}),
])
def test_classification_from_labels(labels, namespace_labels, expected):
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels},
           "spec": {"containers": [dict(CPU)]}}
    assert build_workload(Resource(obj), Classification(), namespace_labels).classes == frozenset(expected)


def test_notebooks_trusted_when_configured():
    obj = make("Notebook").obj
    classes = build_workload(Resource(obj), Classification(notebooks_are_untrusted=False)).classes
    assert "untrusted" not in classes and "notebook" in classes


def test_dynamic_resource_allocation_claims_are_accelerated():
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}], "containers": [dict(CPU)]}}
    assert "accelerated" in build_workload(Resource(obj), Classification()).classes


@pytest.mark.parametrize("spec, pointer", [
    ({"containers": "nginx"}, "/spec/containers"),
    ({"containers": ["nginx"]}, "/spec/containers/0"),
    ({"containers": [{"name": "a", "resources": []}]}, "/spec/containers/0/resources"),
    ({"containers": [{"name": "a", "resources": {"limits": {"memory": "lots"}}}]},
     "/spec/containers/0/resources/limits/memory"),
    ({"containers": [{"name": "a", "volumeMounts": {"name": "x"}}]}, "/spec/containers/0/volumeMounts"),
    ({"containers": [], "volumes": "x"}, "/spec/volumes"),
])
def test_malformed_shapes_name_the_field(spec, pointer):
    # Each is an error for that field, left out of the view; the rest of the resource is still there to check.
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    workload = build_workload(Resource(obj), Classification())
    assert [e.pointer for e in workload.errors] == [pointer]


def test_malformed_metadata_is_still_fatal():
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": "p", "spec": {"containers": [dict(CPU)]}}
    with pytest.raises(ShapeError) as info:
        build_workload(Resource(obj), Classification())
    assert info.value.pointer == "/metadata"


def test_a_bad_quantity_is_left_out_of_the_view_and_its_device_still_classifies():
    container = {"name": "w", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "$GPU_PER_NODE", "memory": "8Gi"}}}
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [container]}}
    workload = build_workload(Resource(obj), Classification())
    assert [e.pointer for e in workload.errors] == ["/spec/containers/0/resources/limits/nvidia.com~1gpu"]
    assert workload.templates[0].containers[0].obj["resources"]["limits"] == {"memory": "8Gi"}
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "$GPU_PER_NODE"  # the object itself is untouched
    assert "accelerated" in workload.classes


def test_containers_without_a_name_are_named_by_their_place():
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"initContainers": [{"image": "x"}], "containers": [{"image": "x"}, {"image": "y"}]}}
    names = [c.name for c in build_workload(Resource(obj), Classification()).templates[0].containers]
    assert names == ["initContainers[0]", "containers[0]", "containers[1]"]


@pytest.mark.parametrize("spec", [{"containers": "nginx"}, {"containers": [], "volumes": "x"},
                                  {"containers": [{"name": "a", "volumeMounts": {"name": "x"}}]}])
def test_a_malformed_field_is_kept_without_its_traceback(spec):
    """The error raised for the field is kept without its frames: they hold `errors` again, a cycle that only the
    cyclic collector frees, with the object and what was built for it; the webhook pauses that collector during a
    review (webhook/app/server.py's Held), so a review's objects must die by reference counting."""
    import gc
    import weakref

    resource = Resource({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    was = gc.isenabled()
    gc.disable()
    try:
        workload = build_workload(resource, Classification())
        assert workload.errors and all(error.__traceback__ is None for error in workload.errors)
        freed = weakref.ref(resource)
        del resource, workload
        assert freed() is None
    finally:
        if was:
            gc.enable()
