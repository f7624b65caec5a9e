"""Policies and exceptions as cluster objects, through a real kube-apiserver with RBAC (issue 24, item 1).

The webhook (tests/e2e/webhooks.py: manifests/base's arguments) watches aiadmit.dev Policy and PolicyException
objects; the CRDs and ClusterRoles are the base's. Users are impersonated (`kubectl --as`), so RBAC decides who may
create an exception exactly as in a cluster. The policy used matches only this module's namespaces, and every
object made here is deleted at the end, so the other modules' reviews meet the shipped bundle only.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

import clusterobjects
from webhooks import OWN_NAMESPACE, aiadmit_cli, wait_until

pytestmark = pytest.mark.e2e

DENIED = 'admission webhook "validate.aiadmit.dev" denied the request'
PREFIX = "crd-e2e"
IMAGE = "registry.example/train@sha256:" + "1" * 64
WEBHOOK_SA = f"system:serviceaccount:{OWN_NAMESPACE}:aiadmit"


def team_policy(name: str, expression: str | None = None) -> dict:
    """examples/policies/team-label.yaml, limited to this module's namespaces."""
    return clusterobjects.team_policy(name, [f"{PREFIX}-*"], expression)


def gpu_pod(name: str, namespace: str) -> dict:
    """A GPU pod that passes every deny-level built-in policy once mutated (requests, a class, a pinned image, a
    quota in its namespace), and has no team label."""
    container = {"name": "train", "image": IMAGE,
                 "resources": {"requests": {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "10Gi"},
                               "limits": {"nvidia.com/gpu": "1", "memory": "8Gi"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [container], "priorityClassName": "ai-batch"}}


def dry_run(apiserver, namespace: str, name: str | None = None) -> tuple[int, str]:
    body = gpu_pod(name or f"p-{uuid.uuid4().hex[:5]}", namespace)
    try:
        client.CoreV1Api(apiserver.api_client).create_namespaced_pod(namespace, body, dry_run="All")
        return 201, ""
    except ApiException as exc:
        return exc.status, json.loads(exc.body).get("message", "") if exc.body else str(exc)


def denied_by_team_label(apiserver, namespace: str, name: str | None = None) -> bool:
    status, message = dry_run(apiserver, namespace, name)
    return status == 403 and DENIED in message and "team-label" in message


def admitted(apiserver, namespace: str, name: str | None = None) -> bool:
    return dry_run(apiserver, namespace, name)[0] == 201


def loaded(apiserver, kind: str, name: str, namespace: str | None = None) -> dict | None:
    """The Loaded condition of the stored object, once it is for the object's current generation."""
    args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    return clusterobjects.loaded_condition(apiserver.kubectl_json(*args))


def apply(apiserver, doc: dict, *extra: str, check: bool = True):
    return apiserver.kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump(doc), check=check)


@pytest.fixture(scope="module")
def cluster(apiserver, aiadmit_server):
    """Two tenant namespaces (a GPU quota each), the class the pods use, the webhook registered; cleaned up after."""
    core = client.CoreV1Api(apiserver.api_client)
    try:
        client.SchedulingV1Api(apiserver.api_client).create_priority_class(
            {"metadata": {"name": "ai-batch"}, "value": 1000})
    except ApiException as exc:
        if exc.status != 409:
            raise
    names = []
    for tenant in ("a", "b"):
        name = f"{PREFIX}-{tenant}-{uuid.uuid4().hex[:5]}"
        core.create_namespace({"metadata": {"name": name}})
        hard = {"requests.nvidia.com/gpu": "8"}
        core.create_namespaced_resource_quota(name, {"metadata": {"name": "gpus"}, "spec": {"hard": hard}})
        core.patch_namespaced_resource_quota_status("gpus", name, {
            "status": {"hard": hard, "used": {"requests.nvidia.com/gpu": "0"}}})
        names.append(name)
    aiadmit_server.register()
    try:
        wait_until(lambda: all(admitted(apiserver, n) for n in names), 90,
                   "the webhook to admit a compliant GPU pod in both namespaces (quota seen live)")
        yield {"a": names[0], "b": names[1], "hook": aiadmit_server}
    finally:
        apiserver.kubectl("delete", "policies.aiadmit.dev", "-l", "aiadmit-e2e=cluster-objects",
                          "--ignore-not-found", check=False)
        for name in names:
            apiserver.kubectl("delete", "policyexceptions.aiadmit.dev", "--all", "-n", name, check=False)
        aiadmit_server.unregister()


def test_least_privilege_of_the_webhook_and_the_approver_role(apiserver, cluster):
    """The shipped ClusterRole lets the webhook read aiadmit's objects and write only their status."""
    def can(user: str, verb: str, resource: str, namespace: str | None = None) -> bool:
        resource, _, sub = resource.partition("/")
        args = ["auth", "can-i", verb, resource, f"--as={user}"] + (["-n", namespace] if namespace else []) \
            + ([f"--subresource={sub}"] if sub else [])
        return apiserver.kubectl(*args, check=False).stdout.strip() == "yes"

    for verb in ("get", "list", "watch"):
        assert can(WEBHOOK_SA, verb, "policies.aiadmit.dev")
        assert can(WEBHOOK_SA, verb, "policyexceptions.aiadmit.dev", cluster["a"])
    assert can(WEBHOOK_SA, "update", "policies.aiadmit.dev", None) is False
    assert can(WEBHOOK_SA, "update", "policies.aiadmit.dev/status")
    assert can(WEBHOOK_SA, "update", "policyexceptions.aiadmit.dev/status", cluster["a"])
    for verb in ("create", "patch", "delete"):
        assert not can(WEBHOOK_SA, verb, "policies.aiadmit.dev")
        assert not can(WEBHOOK_SA, verb, "policyexceptions.aiadmit.dev", cluster["a"])
    assert not can(WEBHOOK_SA, "get", "secrets", cluster["a"])
    assert not can("someone@example.com", "create", "policyexceptions.aiadmit.dev", cluster["a"])
    assert can("system:serviceaccount:default:default", "list", "policyexceptions.aiadmit.dev", cluster["a"]) \
        is False  # aiadmit-view reaches users through the built-in `view` role, not to everyone


def test_a_policy_applied_with_kubectl_is_enforced_and_a_broken_one_costs_only_itself(apiserver, cluster):
    ns = cluster["a"]
    assert admitted(apiserver, ns)
    started = time.monotonic()
    policy = team_policy("e2e-team-label")
    policy["metadata"]["labels"] = {"aiadmit-e2e": "cluster-objects"}
    apply(apiserver, policy)
    wait_until(lambda: denied_by_team_label(apiserver, ns), 10, "the applied Policy to be enforced", interval=0.2)
    enforced_after = time.monotonic() - started
    condition = wait_until(lambda: loaded(apiserver, "policies.aiadmit.dev", "e2e-team-label"), 10,
                           "the Policy's Loaded condition")
    print(f"\nPolicy enforced {enforced_after:.1f} s after kubectl apply; status: {condition}")
    assert condition["status"] == "True" and condition["reason"] == "Loaded"

    # A second policy whose CEL does not compile: refused in its status at line:col, the first keeps working.
    broken = team_policy("e2e-broken", expression=clusterobjects.BROKEN_EXPRESSION)
    broken["metadata"]["labels"] = {"aiadmit-e2e": "cluster-objects"}
    apply(apiserver, broken)
    condition = wait_until(lambda: loaded(apiserver, "policies.aiadmit.dev", "e2e-broken"), 15,
                           "the broken Policy's Loaded condition")
    assert condition["status"] == "False" and condition["reason"] == "Invalid"
    line, column = clusterobjects.position(condition, "e2e-broken")
    shown = clusterobjects.without_status(
        apiserver.kubectl("get", "policies.aiadmit.dev", "e2e-broken", "-o", "yaml").stdout)
    assert shown[line - 1].lstrip().startswith("- expression:"), (line, shown)  # the line kubectl shows
    assert shown[line - 1][column - 1:].startswith("+ 'a'")
    assert denied_by_team_label(apiserver, ns)  # the previous policies keep being enforced
    assert loaded(apiserver, "policies.aiadmit.dev", "e2e-team-label")["status"] == "True"

    apiserver.kubectl("delete", "policies.aiadmit.dev", "e2e-broken")  # the audit below would report it, rightly

    # The shape the API server can decide is refused before the webhook sees it (the CRD's schema and CEL).
    refused = apply(apiserver, team_policy("e2e-no-rules") | {"rules": []}, check=False)
    assert refused.returncode != 0 and "rules" in refused.stderr


def test_an_exception_from_an_approver_covers_one_namespace_and_others_are_refused(apiserver, cluster):
    a, b = cluster["a"], cluster["b"]
    policy = team_policy("e2e-team-label")
    policy["metadata"]["labels"] = {"aiadmit-e2e": "cluster-objects"}
    apply(apiserver, policy)  # as the previous test left it (or anew when run alone)
    wait_until(lambda: denied_by_team_label(apiserver, a) and denied_by_team_label(apiserver, b), 15,
               "the team-label Policy in both namespaces")
    approver = f"approver-{uuid.uuid4().hex[:5]}@example.com"
    apiserver.kubectl("create", "rolebinding", "aiadmit-approvers", "-n", a,
                      "--clusterrole=aiadmit-exception-approver", f"--user={approver}")
    exception = clusterobjects.exception(a, "e2e-team-label")

    # Without the role: refused by RBAC, in its own namespace and in the approver's.
    stranger = apply(apiserver, exception, "--as=stranger@example.com", check=False)
    assert stranger.returncode != 0 and "forbidden" in stranger.stderr.lower(), stranger.stderr
    elsewhere = apply(apiserver, {**exception, "metadata": {"name": "legacy-train", "namespace": b}},
                      f"--as={approver}", check=False)
    assert elsewhere.returncode != 0 and "forbidden" in elsewhere.stderr.lower(), elsewhere.stderr
    # No field reaches another namespace: the schema has none (kubectl's strict field validation refuses it).
    wider = apply(apiserver, {**exception, "spec": {**exception["spec"], "namespaces": ["*"]}},
                  f"--as={approver}", check=False)
    assert wider.returncode != 0 and "namespaces" in wider.stderr, wider.stderr

    apply(apiserver, exception, f"--as={approver}")
    wait_until(lambda: admitted(apiserver, a, "legacy-train-1"), 10, "the exception to let the pod through")
    condition = wait_until(lambda: loaded(apiserver, "policyexceptions.aiadmit.dev", "legacy-train", a), 10,
                           "the exception's Loaded condition")
    assert condition["status"] == "True"
    assert denied_by_team_label(apiserver, b, "legacy-train-1")  # the same pod in the other namespace
    assert denied_by_team_label(apiserver, a, "serve-1")  # another pod of the same namespace

    # `aiadmit audit --cluster` reads the same objects: the Policy (else --policy names an unknown id) and the
    # exception (else the pod let through in a fails it). tests/test_cluster_objects.py covers them as files.
    apiserver.kubectl("delete", "policies.aiadmit.dev", "e2e-broken", "--ignore-not-found")
    core = client.CoreV1Api(apiserver.api_client)
    core.create_namespaced_pod(a, gpu_pod("legacy-train-2", a))
    audit = ("audit", "--cluster", "--kubeconfig", str(apiserver.kubeconfig), "--policy", "e2e-team-label",
             "-f", "json")
    clean = aiadmit_cli(*audit, "-n", a, check=False)
    assert clean.returncode == 0, clean.stderr
    assert json.loads(clean.stdout)["summary"]["resources"] == 1
