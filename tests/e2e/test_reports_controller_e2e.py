"""`aiadmit reports-controller` against the real kube-apiserver: a namespace's PolicyReport follows its workloads.

The controller runs as its own process (the command a Deployment runs), with the PolicyReport CRDs installed. A
violating Deployment created after the controller is synced shows up in its namespace's report within 30 s (the
issue's bound; it takes about a second here), deleting it removes the report, and none of it costs a list request:
the steady state is watches only. A PolicyException applied in one namespace drops the finding from that namespace's
report only, at the cost of one list request (that namespace's Deployments).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from crdwait import wait_established

pytestmark = pytest.mark.e2e

REPORT_CRDS = os.path.join(os.path.dirname(__file__), "..", "data", "wgpolicyk8s-policyreport-crds.yaml")
AIADMIT_CRDS = os.path.join(os.path.dirname(__file__), "..", "..", "manifests", "base", "crds.yaml")
GPU = {"name": "main", "image": "registry.example/serve:v1", "resources": {"limits": {"nvidia.com/gpu": 1}}}


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"^(aiadmit_reports_\w+)(\{[^}]*\})? (\S+)$", line)
        if match:
            out[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return out


def _until(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.2)


def _lists(metrics: dict[str, float]) -> float:
    return sum(v for k, v in metrics.items() if k.startswith("aiadmit_reports_api_requests_total") and 'verb="list"' in k)


@pytest.fixture
def controller(apiserver, tmp_path):
    apiserver.kubectl("apply", "-f", REPORT_CRDS)
    wait_established(apiserver.kubectl, "crd/policyreports.wgpolicyk8s.io")
    # aiadmit's Policy and PolicyException CRDs (the base's), so the controller watches them from its start
    apiserver.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=aiadmit-e2e", "-f", AIADMIT_CRDS)
    wait_established(apiserver.kubectl, "crd/policyexceptions.aiadmit.dev")
    _until(lambda: apiserver.get("/apis/aiadmit.dev/v1alpha1")[0] == 200, 60, "aiadmit.dev/v1alpha1 served")
    port = _port()
    log = open(tmp_path / "controller.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "reports-controller", "--kubeconfig",
                             str(apiserver.kubeconfig), "--metrics-port", str(port), "--metrics-address", "127.0.0.1",
                             "--interval", "0.5"], stdout=log, stderr=subprocess.STDOUT)

    def synced():
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"controller exited {proc.returncode}:\n{log.read()}")
        try:
            return _metrics(port).get("aiadmit_reports_synced") == 1
        except OSError:
            return False

    try:
        _until(synced, 180, "the controller's first reports")
        yield port
    finally:
        proc.terminate()
        proc.wait(30)
        log.seek(0)
        print(log.read()[-4000:])


def _report(apiserver, namespace: str):
    found = apiserver.kubectl("get", "policyreport", "-n", namespace, f"aiadmit-{namespace}", "-o", "json", check=False)
    if found.returncode != 0:
        return None
    import json

    return json.loads(found.stdout)


def test_report_follows_a_violating_deployment(apiserver, controller):
    port = controller
    namespace = f"reports-{os.urandom(3).hex()}"
    apiserver.kubectl("create", "namespace", namespace)
    lists_before = _lists(_metrics(port))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm", "namespace": namespace},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "vllm"}},
                           "template": {"metadata": {"labels": {"app": "vllm"}}, "spec": {"containers": [GPU]}}}}
    import json

    created = time.monotonic()
    apiserver.kubectl("create", "-f", "-", input=json.dumps(deployment))

    def failing():
        report = _report(apiserver, namespace)
        if not report:
            return None
        fails = [r for r in report.get("results", []) if r["result"] == "fail"
                 and r["resources"][0]["name"] == "vllm" and r["resources"][0]["kind"] == "Deployment"]
        return report if fails else None

    report = _until(failing, 30, f"a failing result for Deployment {namespace}/vllm in aiadmit-{namespace}")
    took = time.monotonic() - created
    print(f"report for {namespace} changed {took:.2f}s after the Deployment was created")
    assert report["summary"]["fail"] == len([r for r in report["results"] if r["result"] == "fail"])
    assert report["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "aiadmit"
    # a compliant-ish pod owned by a ReplicaSet of the Deployment is the Deployment's: not a second entry
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "vllm-abc12", "namespace": namespace,
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "vllm-abc",
                                             "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]},
           "spec": {"containers": [GPU]}}
    apiserver.kubectl("create", "-f", "-", input=json.dumps(pod))
    apiserver.kubectl("delete", "deployment", "-n", namespace, "vllm")
    _until(lambda: _report(apiserver, namespace) is None, 30, f"aiadmit-{namespace} deleted with its last workload")
    metrics = _metrics(port)
    assert _lists(metrics) == lists_before, "steady state: watches only, no list request"
    assert metrics["aiadmit_reports_written_total"] >= 2
    assert metrics.get('aiadmit_reports_resyncs_total{scope="cluster"}', 0) == 0


def test_lease_has_one_holder_and_passes_on_when_it_expires(apiserver):
    from webhook.app.leader import LeaderElector

    namespace = f"lease-{os.urandom(3).hex()}"
    apiserver.kubectl("create", "namespace", namespace)
    first = LeaderElector(apiserver.api_client, namespace, "reports", "first", duration=10)
    second = LeaderElector(apiserver.api_client, namespace, "reports", "second", duration=10)
    assert first.try_acquire() and first.try_acquire()  # takes it, then renews it
    assert not second.try_acquire()  # held and fresh
    lease = apiserver.kubectl_json("get", "lease", "-n", namespace, "reports")
    assert lease["spec"]["holderIdentity"] == "first"
    time.sleep(11)  # first stops renewing: past leaseDurationSeconds the lease is free
    assert second.try_acquire()
    lease = apiserver.kubectl_json("get", "lease", "-n", namespace, "reports")
    assert lease["spec"]["holderIdentity"] == "second" and lease["spec"]["leaseTransitions"] == 1
    assert not first.try_acquire()


def _lists_by_kind(metrics: dict[str, float]) -> dict[str, float]:
    out = {}
    for key, value in metrics.items():
        match = re.match(r'aiadmit_reports_api_requests_total\{kind="([^"]+)",verb="list"\}', key)
        if match:
            out[match.group(1)] = value
    return out


def _failing(apiserver, namespace: str, name: str) -> set[str]:
    report = _report(apiserver, namespace) or {}
    return {r["policy"] for r in report.get("results", []) if r["result"] == "fail"
            and r["resources"][0]["name"] == name and r["resources"][0]["kind"] == "Deployment"}


def test_a_policy_exception_drops_the_finding_in_its_namespace_only(apiserver, controller):
    import json

    port = controller
    suffix = os.urandom(3).hex()
    tenant, other = f"exc-a-{suffix}", f"exc-b-{suffix}"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "vllm"}},
                           "template": {"metadata": {"labels": {"app": "vllm"}}, "spec": {"containers": [GPU]}}}}
    for namespace in (tenant, other):
        apiserver.kubectl("create", "namespace", namespace)
        apiserver.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(deployment))
    failing = _until(lambda: _failing(apiserver, tenant, "vllm"), 30, f"{tenant}/vllm failing in its report")
    _until(lambda: _failing(apiserver, other, "vllm") == failing, 30, f"{other}/vllm failing as {tenant}/vllm")
    before = _metrics(port)
    exception = {"apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyException",
                 "metadata": {"name": "legacy-vllm", "namespace": tenant},
                 "spec": {"policies": sorted(failing), "match": {"names": ["vllm"], "kinds": ["Deployment"]},
                          "reason": "legacy serving, fixed next sprint", "requestedBy": "lead@team-a"}}
    applied = time.monotonic()
    apiserver.kubectl("apply", "-f", "-", input=json.dumps(exception))
    _until(lambda: not _failing(apiserver, tenant, "vllm"), 30, f"{tenant}/vllm lifted by its exception")
    print(f"report for {tenant} dropped the finding {time.monotonic() - applied:.2f}s after the exception")
    time.sleep(1.5)  # any read it would still make (a late event) is counted below
    assert _failing(apiserver, other, "vllm") == failing, "an exception covers only its own namespace"
    after = _metrics(port)
    changed = {kind: after_count - _lists_by_kind(before).get(kind, 0)
               for kind, after_count in _lists_by_kind(after).items() if after_count != _lists_by_kind(before).get(kind)}
    # one namespace, one kind (the exception's match.kinds), one page: the change costs one list request
    assert changed == {"Deployment.apps": 1}, changed
    assert after.get('aiadmit_reports_cluster_object_changes_total{kind="PolicyException",outcome="loaded"}', 0) \
        == before.get('aiadmit_reports_cluster_object_changes_total{kind="PolicyException",outcome="loaded"}', 0) + 1
    assert after.get('aiadmit_reports_resyncs_total{scope="cluster"}', 0) == \
        before.get('aiadmit_reports_resyncs_total{scope="cluster"}', 0)
    apiserver.kubectl("delete", "policyexception", "-n", tenant, "legacy-vllm")
    _until(lambda: _failing(apiserver, tenant, "vllm") == failing, 30, f"{tenant}/vllm failing again without it")
    for namespace in (tenant, other):
        apiserver.kubectl("delete", "deployment", "-n", namespace, "vllm")
