"""`aiadmit audit --cluster` against a real kube-apiserver (tests/e2e/conftest.py).

The objects are created through the API server, listed back by aiadmit with
pagination and API discovery (the AI CRDs are installed by the `crds`
fixture), and the findings must be the ones an offline audit of the very same
objects gives, with cluster coordinates instead of lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from webhook.app.audit import audit_resources
from webhook.app.clusteraudit import audit_cluster, connect
from webhook.engine.core import Engine
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource
from crdwait import wait_established

pytestmark = pytest.mark.e2e

REPORT_CRDS = os.path.join(os.path.dirname(__file__), "..", "data", "wgpolicyk8s-policyreport-crds.yaml")
GPU_CONTAINER = {"name": "main", "image": "registry.example/serve:v1",
                 "resources": {"limits": {"nvidia.com/gpu": 1}}}
PLAIN_CONTAINER = {"name": "main", "image": "registry.k8s.io/pause:3.10"}


def _objects(namespace: str) -> list[dict]:
    meta = lambda name, **extra: {"name": name, "namespace": namespace, **extra}  # noqa: E731
    objects = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("vllm"),
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "vllm"}},
                  "template": {"metadata": {"labels": {"app": "vllm"}}, "spec": {"containers": [GPU_CONTAINER]}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": meta("gpu-pod"), "spec": {"containers": [GPU_CONTAINER]}},
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta("train"),
         "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
             {**GPU_CONTAINER, "name": "pytorch"}]}}}}}},
    ]
    # more plain pods than one page holds: pagination must not lose any
    objects += [{"apiVersion": "v1", "kind": "Pod", "metadata": meta(f"plain-{i}"),
                 "spec": {"containers": [PLAIN_CONTAINER]}} for i in range(7)]
    return objects


@pytest.fixture(scope="module")
def cluster(apiserver, crds, tmp_path_factory):
    """A namespace with AI workloads, plain pods and a pod owned by the Deployment; returns (ns, objects)."""
    namespace = f"audit-{os.urandom(3).hex()}"
    apiserver.kubectl("create", "namespace", namespace)
    apiserver.kubectl("label", "namespace", namespace, "team=ml")
    objects = _objects(namespace)
    apiserver.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))
    deployment = apiserver.kubectl_json("get", "deployment", "vllm", "-n", namespace)
    owned = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "vllm-abc12", "namespace": namespace, "ownerReferences": [{
                 "apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm", "uid": deployment["metadata"]["uid"],
                 "controller": True}]},
             "spec": {"containers": [GPU_CONTAINER]}}
    apiserver.kubectl("apply", "-f", "-", input=json.dumps(owned))
    # a quota is a cluster fact the audit must read (created last: without a quota controller it blocks pods)
    apiserver.kubectl("create", "quota", "gpus", "-n", namespace, "--hard=requests.nvidia.com/gpu=4")
    return namespace, objects, owned


def _key(finding):
    return (finding.policy, finding.rule, finding.resource.kind, finding.resource.name, finding.pointer,
            finding.result, finding.action)


def test_cluster_findings_equal_an_offline_audit_of_the_same_objects(apiserver, cluster):
    namespace, _, _ = cluster
    engine = Engine.load()
    api, context, _ = connect(kubeconfig=str(apiserver.kubeconfig))
    assert context == "e2e"
    live = audit_cluster(engine, api, context, [namespace], page_size=3)
    names = sorted(e.resource.name for e in live.evaluations if e.resource.kind != "ResourceQuota")
    assert names == sorted(["vllm", "gpu-pod", "train"] + [f"plain-{i}" for i in range(7)]), \
        "pagination (page size 3) or discovery lost objects, or the owned pod was not skipped"
    assert not live.errors
    assert all(f.resource.origin.cluster == "e2e" and f.resource.origin.file is None for f in live.findings)

    # the same objects as the API server stores them, audited offline with the same facts
    listed = []
    for kind in ("deployments", "pods", "pytorchjobs.kubeflow.org", "resourcequotas"):
        listed += apiserver.kubectl_json("get", kind, "-n", namespace)["items"]
    listed += [apiserver.kubectl_json("get", "namespace", namespace)]
    listed = [o for o in listed if o["metadata"]["name"] != "vllm-abc12"]
    resources = [Resource(o) for o in listed]
    offline = audit_resources(engine, resources, facts=OfflineFacts(resources))
    assert live.findings, "GPU workloads without shm or resources must have findings"
    assert sorted(map(_key, live.findings)) == sorted(map(_key, offline.findings))
    policies = {f.policy for f in live.findings}
    assert {"shm-sized", "resources-declared"} <= policies

    with_owned = audit_cluster(engine, api, context, [namespace], include_owned=True)
    assert "vllm-abc12" in {e.resource.name for e in with_owned.evaluations}


def aiadmit(*args):
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=300)


def test_cli_formats_carry_cluster_coordinates(apiserver, cluster):
    namespace, _, _ = cluster
    base = ("audit", "--cluster", "--kubeconfig", str(apiserver.kubeconfig), "-n", namespace, "--page-size", "4")
    text = aiadmit(*base)
    assert text.returncode == 1, text.stderr
    assert f"e2e: Pod {namespace}/gpu-pod spec.containers[0]" in text.stdout
    assert "\r" not in text.stderr, "no progress bar when stderr is not a terminal"
    document = json.loads(aiadmit(*base, "-f", "json").stdout)
    finding = next(f for f in document["findings"] if f["resource"]["name"] == "gpu-pod")
    assert finding["file"] is None and finding["line"] is None and finding["resource"]["namespace"] == namespace
    sarif = json.loads(aiadmit(*base, "-f", "sarif").stdout)
    location = sarif["runs"][0]["results"][0]["locations"][0]
    assert "physicalLocation" not in location
    assert location["logicalLocations"][0]["fullyQualifiedName"].startswith(f"e2e/{namespace}/")
    everything = aiadmit("audit", "--cluster", "--kubeconfig", str(apiserver.kubeconfig), "-A", "-f", "json")
    assert {f["resource"]["namespace"] for f in json.loads(everything.stdout)["findings"]} >= {namespace}
    wrong = aiadmit("audit", "--cluster", "--kubeconfig", str(apiserver.kubeconfig), "--context", "nope")
    assert wrong.returncode == 2 and "context 'nope'" in wrong.stderr and "Traceback" not in wrong.stderr


def test_policyreports_applied_to_the_cluster(apiserver, cluster):
    namespace, _, _ = cluster
    base = ("audit", "--cluster", "--kubeconfig", str(apiserver.kubeconfig), "-n", namespace,
            "-f", "policyreport", "--apply-reports")
    missing = aiadmit(*base)
    if "is the wgpolicyk8s.io PolicyReport CRD installed?" not in missing.stderr:
        assert apiserver.kubectl("get", "crd", "policyreports.wgpolicyk8s.io", check=False).returncode == 0
    apiserver.kubectl("apply", "-f", REPORT_CRDS)
    wait_established(apiserver.kubectl, "crd/policyreports.wgpolicyk8s.io")
    first = aiadmit(*base)
    assert first.returncode == 1, first.stderr
    assert f"created PolicyReport {namespace}/aiadmit-{namespace}" in first.stderr
    stored = apiserver.kubectl_json("get", "policyreports", "-n", namespace)["items"]
    assert [r["metadata"]["name"] for r in stored] == [f"aiadmit-{namespace}"]
    report = stored[0]
    printed = list(yaml.safe_load_all(first.stdout))
    assert report["summary"] == printed[0]["summary"] and report["summary"]["fail"] > 0
    assert report["summary"]["pass"] > 0  # the plain pods pass what applies to them
    assert {r["resources"][0]["name"] for r in report["results"] if r["result"] == "fail"} >= {"gpu-pod", "vllm"}
    # a second run replaces its report; a smaller size limit splits it and the stale one is removed
    second = aiadmit(*base, "--max-report-bytes", "10000")
    assert second.returncode == 1, second.stderr
    names = sorted(r["metadata"]["name"] for r in
                   apiserver.kubectl_json("get", "policyreports", "-n", namespace)["items"])
    assert names[0] == f"aiadmit-{namespace}" and len(names) >= 2
    third = aiadmit(*base)
    assert "deleted stale PolicyReport" in third.stderr
    assert [r["metadata"]["name"] for r in apiserver.kubectl_json("get", "policyreports", "-n", namespace)["items"]] \
        == [f"aiadmit-{namespace}"]
