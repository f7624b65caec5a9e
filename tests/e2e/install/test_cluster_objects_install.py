"""Issue 24's cluster objects and reports controller in the single-node cluster, against the webhook as installed.

The image as built, deployed by the Helm chart (one install: the reports controller is a value of it,
`reportsController.enabled`, turned on here by `helm upgrade --reuse-values`), with its own ServiceAccount and
RBAC. A Policy applied with `kubectl apply` is enforced within 10 s and says Loaded; a broken one is refused in its
status at line:col while the first keeps being enforced; a PolicyException applied by a user bound (RoleBinding) to
the shipped `aiadmit-exception-approver` ClusterRole lets one pod through in that namespace only, and one applied by
a user without the role is refused by RBAC (users impersonated with `kubectl --as`, as test_cluster_objects_e2e.py
does); the controller's PolicyReport for a namespace changes within 30 s of a violating Deployment created there.
Everything made here is deleted at the end.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import yaml

import clusterobjects
import installs
from gpuadmission import DENIED, dry_run, gpu_pod, make_gpu_namespace
from nodeharness import NAMESPACE, wait_for
from crdwait import wait_established

pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.parametrize("installed", ["helm"], indirect=True)]

REPORT_CRDS = Path(__file__).resolve().parent.parent.parent / "data" / "wgpolicyk8s-policyreport-crds.yaml"
POLICY = "team-label-install"
LABEL = "aiadmit-install=cluster-objects"


def _apply(node, doc: dict, *extra: str):
    return node.kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump(doc), check=False)


def _loaded(node, kind: str, name: str, namespace: str | None = None) -> dict | None:
    args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    return clusterobjects.loaded_condition(json.loads(node.kubectl(*args).stdout))


def _denied_by_team_label(api, namespace: str, name: str) -> bool:
    status, message, _ = dry_run(api, gpu_pod(name, namespace))
    return status == 403 and DENIED in message and f"{POLICY}: " in message


@pytest.fixture(scope="module")
def tenants(node, installed, api):
    """Two namespaces with a GPU quota (compliant GPU pods admitted in both); the objects made here go after."""
    names = [make_gpu_namespace(api), make_gpu_namespace(api)]
    try:
        yield names
    finally:
        node.kubectl("delete", "policies.aiadmit.dev", "-l", LABEL, "--ignore-not-found", check=False)
        for name in names:
            node.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false", check=False)


def test_policies_and_exceptions_applied_with_kubectl_are_enforced_by_the_installed_webhook(node, installed, api,
                                                                                           tenants):
    a, b = tenants
    assert dry_run(api, gpu_pod("before", a))[0] == 201
    policy = clusterobjects.team_policy(POLICY, [a, b])
    policy["metadata"]["labels"] = dict([LABEL.split("=")])
    started = time.monotonic()
    p = _apply(node, policy)
    assert p.returncode == 0, p.stderr
    wait_for("the applied Policy to be enforced by both replicas", lambda: all(
        _denied_by_team_label(api, a, f"p-{i}") for i in range(4)), 10, 0.2)
    enforced = time.monotonic() - started
    condition = wait_for("the Policy's Loaded condition", lambda: _loaded(node, "policies.aiadmit.dev", POLICY), 10)
    assert condition["status"] == "True" and condition["reason"] == "Loaded", condition

    broken = clusterobjects.team_policy("broken-install", [a, b], clusterobjects.BROKEN_EXPRESSION)
    broken["metadata"]["labels"] = dict([LABEL.split("=")])
    assert _apply(node, broken).returncode == 0
    condition = wait_for("the broken Policy's Loaded condition",
                         lambda: _loaded(node, "policies.aiadmit.dev", "broken-install"), 15)
    assert condition["status"] == "False" and condition["reason"] == "Invalid", condition
    line, column = clusterobjects.position(condition, "broken-install")
    shown = clusterobjects.without_status(
        node.kubectl("get", "policies.aiadmit.dev", "broken-install", "-o", "yaml").stdout)
    assert shown[line - 1].lstrip().startswith("- expression:"), (line, shown)
    assert shown[line - 1][column - 1:].startswith("+ 'a'"), (column, shown[line - 1])
    assert all(_denied_by_team_label(api, a, f"q-{i}") for i in range(4))  # the previous policy, on both replicas
    assert _loaded(node, "policies.aiadmit.dev", POLICY)["status"] == "True"
    node.kubectl("delete", "policies.aiadmit.dev", "broken-install")

    approver = f"approver-{uuid.uuid4().hex[:5]}@example.com"
    node.kubectl("create", "rolebinding", "aiadmit-approvers", "-n", a, "--clusterrole=aiadmit-exception-approver",
                 f"--user={approver}")
    exception = clusterobjects.exception(a, POLICY)
    stranger = _apply(node, exception, "--as=stranger@example.com")
    assert stranger.returncode != 0 and "forbidden" in stranger.stderr.lower(), stranger.stderr
    elsewhere = _apply(node, {**exception, "metadata": {"name": "legacy-train", "namespace": b}}, f"--as={approver}")
    assert elsewhere.returncode != 0 and "forbidden" in elsewhere.stderr.lower(), elsewhere.stderr
    started = time.monotonic()
    p = _apply(node, exception, f"--as={approver}")
    assert p.returncode == 0, p.stderr
    wait_for("the exception to let the pod through on both replicas", lambda: all(
        dry_run(api, gpu_pod("legacy-train-1", a))[0] == 201 for _ in range(4)), 10, 0.2)
    excepted = time.monotonic() - started
    condition = wait_for("the exception's Loaded condition",
                         lambda: _loaded(node, "policyexceptions.aiadmit.dev", "legacy-train", a), 10)
    assert condition["status"] == "True", condition
    assert _denied_by_team_label(api, b, "legacy-train-1")  # the same pod in the other namespace
    assert _denied_by_team_label(api, a, "serve-1")  # another pod of the same namespace
    print(f"Policy enforced {enforced:.1f} s after kubectl apply; broken one refused at {line}:{column}; "
          f"approver's exception effective {excepted:.1f} s after apply, a stranger's refused by RBAC")


def _deployment(name: str, namespace: str) -> dict:
    """Admitted with warnings only (tag not pinned, 500m cpu for one GPU): the webhook lets it in, the report
    records it. No replicas, so it takes none of the node's 2 cpus."""
    container = {"name": "serve", "image": "registry.example/serve:1.0",
                 "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
                 "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 10,
                                  "failureThreshold": 60},
                 "resources": {"requests": {"cpu": "500m", "memory": "8Gi", "ephemeral-storage": "10Gi"},
                               "limits": {"nvidia.com/gpu": "1", "memory": "8Gi"}},
                 "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": {"team": "infer"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name, "team": "infer"}},
                                  "spec": {"priorityClassName": "ai-inference", "containers": [container],
                                           "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory",
                                                                                     "sizeLimit": "2Gi"}}]}}}}


def _controller_steady(node) -> bool:
    pods = json.loads(node.kubectl("-n", NAMESPACE, "get", "pods", "-l",
                                   "app.kubernetes.io/component=reports-controller", "-o", "json").stdout)["items"]
    statuses = [s for p in pods for s in p["status"].get("containerStatuses") or ()]
    return len(pods) == 1 and len(statuses) == 1 and statuses[0]["ready"] and statuses[0]["restartCount"] == 0


def _results_for(node, namespace: str, name: str) -> list[dict]:
    p = node.kubectl("-n", namespace, "get", "policyreport", f"aiadmit-{namespace}", "-o", "json", check=False)
    if p.returncode != 0:
        return []
    return [r for r in json.loads(p.stdout).get("results") or []
            if r["resources"][0]["kind"] == "Deployment" and r["resources"][0]["name"] == name]


def test_the_installed_reports_controller_reports_a_violating_deployment_within_30_s(node, installed, tenants):
    a, b = tenants
    p = node.kubectl("apply", "--server-side", "-f", str(REPORT_CRDS))
    assert p.returncode == 0, p.stderr
    wait_established(node.kubectl, "crd/policyreports.wgpolicyk8s.io")
    installed.run_helm("upgrade", installs.RELEASE, str(installs.CHART), "--reuse-values", "--set",
                       "reportsController.enabled=true", "--set", "reportsController.replicas=1")
    rollout = node.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/aiadmit-reports-controller",
                           "--timeout=180s", timeout=200, check=False)
    if rollout.returncode != 0:
        logs = node.kubectl("-n", NAMESPACE, "logs", "deployment/aiadmit-reports-controller", "--tail=40",
                            check=False)
        pytest.fail(f"reports controller rollout: {rollout.stderr}\n{logs.stdout}{logs.stderr}", pytrace=False)
    # `rollout status` can pass while the only pod is Running between crashes: ready and never restarted.
    wait_for("the reports controller's pod ready, never restarted", lambda: _controller_steady(node), 90, 1)
    # Synced first (a sentinel in the other namespace), so that the 30 s below are the change's, not the start's.
    assert node.kubectl("apply", "-f", "-", input=json.dumps(_deployment("sentinel", b))).returncode == 0
    wait_for("the controller's report of the sentinel", lambda: _results_for(node, b, "sentinel"), 180, 1)
    assert not _results_for(node, a, "serve")
    created = time.monotonic()
    p = node.kubectl("apply", "-f", "-", input=json.dumps(_deployment("serve", a)), check=False)
    assert p.returncode == 0 and "Warning: " in p.stderr, p.stderr  # admitted, with the warn-level findings
    results = wait_for("the namespace's report to show the Deployment", lambda: _results_for(node, a, "serve"),
                       30, 0.2)
    took = time.monotonic() - created
    warned = {r["policy"] for r in results if r["result"] == "warn"}
    assert warned == {"image-digest", "resources-declared"}, results
    print(f"report of {a} changed {took:.1f} s after the Deployment was created: warn {sorted(warned)}")
