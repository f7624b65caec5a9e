"""Proves the e2e control plane (real etcd + kube-apiserver + kubectl) works."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from testdata import crd_files

pytestmark = pytest.mark.e2e

CONTAINER = {"name": "main", "image": "registry.k8s.io/pause:3.10"}
POD_SPEC = {"containers": [CONTAINER]}
POD_TEMPLATE = {"spec": POD_SPEC}

# One minimal valid object per AI workload kind (the CRDs come verbatim from
# /work/shared/crds, or the repository's copy of them in tests/data). The "probe" is a path whose value must read back.
MINIMAL_OBJECTS = {
    "PyTorchJob": {
        "apiVersion": "kubeflow.org/v1",
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {
            "spec": {"containers": [{"name": "pytorch", "image": "pytorch/pytorch:2.4.0"}]}}}}},
    },
    "TrainJob": {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    },
    "RayJob": {
        "apiVersion": "ray.io/v1",
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {
                "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.41.0"}]}}}},
        },
    },
    "RayCluster": {
        "apiVersion": "ray.io/v1",
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {
            "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.41.0"}]}}}},
    },
    "InferenceService": {
        "apiVersion": "serving.kserve.io/v1beta1",
        "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                         "storageUri": "gs://kfserving-examples/models/sklearn/1.0/model"}}},
    },
    "Notebook": {
        "apiVersion": "kubeflow.org/v1",
        "spec": {"template": {"spec": {"containers": [{"name": "nb", "image": "jupyter/base-notebook:latest"}]}}},
    },
    "LeaderWorkerSet": {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": POD_TEMPLATE}},
    },
    "JobSet": {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}}}}]},
    },
}


def _manifest(kind: str, name: str, namespace: str) -> dict:
    obj = json.loads(json.dumps(MINIMAL_OBJECTS[kind]))
    obj["kind"] = kind
    obj["metadata"] = {"name": name, "namespace": namespace, "labels": {"aiadmit.test/kind": kind.lower()}}
    return obj


def pinned_kubernetes() -> str:
    """The k8s.io/kubernetes version tests/e2e/cluster/go.mod pins (what build.sh stamps into the binaries)."""
    go_mod = (Path(__file__).resolve().parent / "cluster" / "go.mod").read_text()
    return re.search(r"^\s*k8s\.io/kubernetes (v\S+)", go_mod, re.M).group(1)


def test_readyz(apiserver):
    status, body = apiserver.get("/readyz")
    assert (status, body) == (200, b"ok")
    assert apiserver.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    version = apiserver.kubectl_json("version")
    server = version["serverVersion"]
    print(f"\nkube-apiserver {server['gitVersion']} (kubectl {version['clientVersion']['gitVersion']}, "
          f"{server['goVersion']})")
    # The binaries under test are the pinned ones (a stale cache entry or AIADMIT_E2E_BIN_DIR of another version fails).
    assert server["gitVersion"] == pinned_kubernetes() == "v1.37.2"
    assert (server["major"], server["minor"]) == ("1", "37")
    assert version["clientVersion"]["gitVersion"] == server["gitVersion"]


def test_admin_identity_and_rbac(apiserver):
    who = apiserver.kubectl_json("auth", "whoami")
    assert "system:masters" in who["status"]["userInfo"]["groups"]
    # RBAC is the authorizer: an unprivileged user is denied.
    p = apiserver.kubectl("auth", "can-i", "create", "pods", "--as=nobody", "-n", "default", check=False)
    assert (p.returncode, p.stdout.strip()) == (1, "no")
    assert apiserver.kubectl("auth", "can-i", "create", "pods", "-n", "default").stdout.strip() == "yes"


def test_namespace_and_pod_with_kubectl(apiserver):
    apiserver.kubectl("create", "namespace", "e2e-kubectl")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain", "namespace": "e2e-kubectl"},
        "spec": POD_SPEC,
    }
    apiserver.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod))
    got = apiserver.kubectl_json("get", "pod", "plain", "-n", "e2e-kubectl")
    assert got["spec"]["containers"][0]["image"] == CONTAINER["image"]
    # No scheduler/kubelet: the pod is accepted and stays Pending, unbound.
    assert got["status"]["phase"] == "Pending"
    assert not got["spec"].get("nodeName")


def test_namespace_and_pod_with_python_client(apiserver):
    from kubernetes import client

    core = client.CoreV1Api(apiserver.api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="e2e-python")))
    assert core.read_namespace("e2e-python").status.phase == "Active"
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="plain"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image=CONTAINER["image"])]),
    )
    core.create_namespaced_pod("e2e-python", pod)
    got = core.read_namespaced_pod("plain", "e2e-python")
    assert got.status.phase == "Pending"
    assert [p.metadata.name for p in core.list_namespaced_pod("e2e-python").items] == ["plain"]


def test_all_shared_crds_established(apiserver, crds):
    crd_dir = Path(os.environ.get("AIADMIT_E2E_CRDS", "/work/shared/crds"))
    assert len(crds) == len(crd_files(crd_dir)) >= 8
    assert {c.split(".", 1)[1] for c in crds} >= {
        "kubeflow.org", "trainer.kubeflow.org", "ray.io", "serving.kserve.io",
        "leaderworkerset.x-k8s.io", "jobset.x-k8s.io"}
    for crd in apiserver.kubectl_json("get", "crd")["items"]:
        conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conds.get("Established") == "True", crd["metadata"]["name"]
        assert conds.get("NamesAccepted") == "True", crd["metadata"]["name"]


@pytest.mark.parametrize("kind", sorted(MINIMAL_OBJECTS))
def test_crd_kind_accepts_minimal_object(apiserver, crds, namespace, kind):
    obj = _manifest(kind, f"min-{kind.lower()}", namespace)
    apiserver.kubectl("apply", "-f", "-", input=yaml.safe_dump(obj))
    resource = f"{kind.lower()}.{obj['apiVersion'].split('/')[0]}"
    got = apiserver.kubectl_json("get", resource, obj["metadata"]["name"], "-n", namespace)
    assert got["kind"] == kind
    assert got["apiVersion"] == obj["apiVersion"]
    assert got["metadata"]["labels"] == obj["metadata"]["labels"]
    # The spec survives the schema (nothing we sent was pruned).
    assert _is_subset(obj["spec"], got["spec"]), json.dumps(got["spec"], indent=1)


def test_server_dry_run_stores_nothing(apiserver, crds, namespace):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry", "namespace": namespace},
          "data": {"k": "v"}}
    job = _manifest("PyTorchJob", "dry-job", namespace)
    for obj, resource in ((cm, "configmap"), (job, "pytorchjobs.kubeflow.org")):
        out = apiserver.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(obj)).stdout
        assert "(server dry run)" in out
        p = apiserver.kubectl("get", resource, obj["metadata"]["name"], "-n", namespace, check=False)
        assert p.returncode == 1 and "NotFound" in p.stderr, p
    assert apiserver.kubectl_json("get", "configmaps,pytorchjobs", "-n", namespace)["items"] == []


def _is_subset(want, got) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and _is_subset(v, got[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(map(_is_subset, want, got))
    return want == got
