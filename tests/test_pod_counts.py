"""Pod counts from the kinds table for the kinds whose controllers fill in counts the manifest leaves out.

gang-admission decides on `workload.podCount`, so a wrong count is a missed (or invented) gang.
"""

import pytest

from webhook.model.resource import Origin, Resource
from webhook.k8s.workload import Classification, build_workload

POD = {"containers": [{"name": "c", "image": "i"}]}


def count(obj: dict) -> tuple[int, list]:
    workload = build_workload(Resource(obj, Origin(file="t.yaml")), Classification())
    return workload.pod_count, [(t.name, t.pod_count) for t in workload.templates]


def ray(kind: str, groups: list[dict]) -> dict:
    cluster = {"headGroupSpec": {"template": {"spec": POD}},
               "workerGroupSpecs": [dict(g, template={"spec": POD}) for g in groups]}
    spec = {"RayCluster": cluster, "RayJob": {"rayClusterSpec": cluster},
            "RayService": {"rayClusterConfig": cluster}}[kind]
    return {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "r"}, "spec": spec}


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob", "RayService"])
def test_ray_worker_replicas_default_to_zero_and_rise_to_min_replicas(kind):
    # The CRD defaults replicas to 0; KubeRay raises the group to minReplicas; numOfHosts multiplies.
    assert count(ray(kind, [{"groupName": "a", "maxReplicas": 5}]))[0] == 1
    assert count(ray(kind, [{"groupName": "a", "minReplicas": 2, "maxReplicas": 5}]))[0] == 3
    assert count(ray(kind, [{"groupName": "a", "replicas": 1, "minReplicas": 3, "maxReplicas": 5}]))[0] == 4
    assert count(ray(kind, [{"groupName": "a", "replicas": 2, "numOfHosts": 4, "maxReplicas": 5}]))[0] == 9


def lws(leader: bool) -> dict:
    template = {"size": 4, "workerTemplate": {"spec": POD}}
    if leader:
        template["leaderTemplate"] = {"spec": POD}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "l"},
            "spec": {"replicas": 3, "leaderWorkerTemplate": template}}


def test_lws_with_a_leader_template_splits_each_group_into_leader_and_workers():
    assert count(lws(leader=True)) == (12, [("leader", 3), ("worker", 9)])


def test_lws_without_a_leader_template_runs_every_pod_from_the_worker_template():
    assert count(lws(leader=False)) == (12, [("worker", 12)])
