"""Least privilege, shown on the real kube-apiserver v1.37.2: the webhook (`serve`) and the reports controller each
run as their own ServiceAccount with exactly the shipped RBAC, and each does its whole job; one permission fewer is
noticed, never a silent pass.

The RBAC objects are the shipped ones, applied as they are: `kubectl kustomize manifests/base` (the webhook's
ServiceAccount, ClusterRole and ClusterRoleBinding) and manifests/components/reports-controller/rbac.yaml (its
ServiceAccount, ClusterRole, Lease Role and bindings; the chart's copy equals it, tests/test_reports_controller.py).
Each process authenticates with a token from the TokenRequest API (`kubectl create token`), not impersonation, so
the API server's authorizer decides every request as in a cluster.

"One fewer": a second ServiceAccount bound to a copy of the shipped ClusterRole less one rule (the shipped objects are
never changed). The reports controller without list/watch on policyexceptions never reports itself synced, counts
the failures per kind and names the 403; the webhook without `nodes` never becomes ready (its live cluster context
is incomplete), and without the status rule it says the status write was forbidden and writes none.
"""

from __future__ import annotations

import copy
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from webhooks import OWN_NAMESPACE, REPO, Rendered, Webhook, wait_until
from crdwait import wait_established

pytestmark = pytest.mark.e2e

CONTROLLER_RBAC = REPO / "manifests" / "components" / "reports-controller" / "rbac.yaml"
REPORT_CRDS = REPO / "tests" / "data" / "wgpolicyk8s-policyreport-crds.yaml"
GPU = {"name": "main", "image": "registry.example/serve:v1", "resources": {"limits": {"nvidia.com/gpu": 1}}}
# A 403 as the logs say one (a status code standing alone), not the digits 403 inside a number: the JSON log lines
# carry "ts": 1796610189.403, which the bare r"403" matched (a run on 2026-12-07 failed on that timestamp).
FORBIDDEN = re.compile(r"(?<![\d.])403(?![\d.])|forbidden", re.I)


def _apply(apiserver, objects: list[dict]) -> None:
    apiserver.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=aiadmit-e2e", "-f", "-",
                      input=yaml.safe_dump_all(objects))


def _token_kubeconfig(apiserver, account: str, path: Path) -> Path:
    """A kubeconfig holding a TokenRequest token of `account` (in the webhook's namespace), the e2e CA and server."""
    token = apiserver.kubectl("create", "token", account, "-n", OWN_NAMESPACE, "--duration=3600s").stdout.strip()
    admin = yaml.safe_load(Path(apiserver.kubeconfig).read_text())
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": admin["clusters"][0]["name"], "user": account}}],
        "current-context": account}))
    os.chmod(path, 0o600)
    return path


def _less_one_rule(role: dict, name: str, keep) -> list[dict]:
    """A ServiceAccount `name` bound to a copy of `role` without the rules `keep` refuses (and resource removed)."""
    rules = []
    for rule in role["rules"]:
        kept = keep(rule)
        if kept:
            rules.append(kept)
    assert rules != role["rules"], "the rule to remove is not in the shipped role"
    meta = {"name": name, "labels": {"app.kubernetes.io/part-of": "aiadmit-e2e"}}
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta, namespace=OWN_NAMESPACE)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": OWN_NAMESPACE}]}]


def _without(resource: str, group: str | None = None):
    def keep(rule):
        if group is not None and group not in rule["apiGroups"]:
            return rule
        if resource not in rule["resources"]:
            return rule
        rest = [r for r in rule["resources"] if r != resource]
        return dict(rule, resources=rest) if rest else None
    return keep


@pytest.fixture(scope="module")
def shipped(apiserver, aiadmit_server):
    """The shipped RBAC and ServiceAccounts applied; aiadmit's CRDs (aiadmit_server installs the base's) and the
    PolicyReport CRDs served. Returns (webhook ClusterRole, controller ClusterRole)."""
    rendered = Rendered(apiserver.kubectl_bin)
    base = [o for o in rendered.objects if o["kind"] in ("Namespace", "ServiceAccount", "ClusterRole",
                                                         "ClusterRoleBinding")]
    controller = [d for d in yaml.safe_load_all(CONTROLLER_RBAC.read_text()) if d]
    _apply(apiserver, base)
    _apply(apiserver, controller)
    apiserver.kubectl("apply", "-f", str(REPORT_CRDS))
    wait_established(apiserver.kubectl, "crd/policyreports.wgpolicyk8s.io")
    (webhook_role,) = [o for o in base if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "aiadmit"]
    controller_role = next(o for o in controller if o["kind"] == "ClusterRole")
    return webhook_role, controller_role


# --------------------------------------------------------------------------- the reports controller

def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _controller_metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(aiadmit_reports_\S+) (\S+)$", text, re.M)}


class Controller:
    def __init__(self, kubeconfig: Path, log_path: Path, *extra: str):
        self.port = _port()
        self.log_path = log_path
        self.log = open(log_path, "w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "webhook", "reports-controller", "--kubeconfig",
                                      str(kubeconfig), "--metrics-port", str(self.port), "--metrics-address",
                                      "127.0.0.1", "--interval", "0.5", *extra],
                                     cwd=str(REPO), stdout=self.log, stderr=subprocess.STDOUT)

    def metrics(self) -> dict[str, float]:
        if self.proc.poll() is not None:
            raise AssertionError(f"controller exited {self.proc.returncode}:\n{self.text()[-3000:]}")
        try:
            return _controller_metrics(self.port)
        except OSError:
            return {}

    def text(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def _report(apiserver, namespace: str):
    found = apiserver.kubectl("get", "policyreport", "-n", namespace, f"aiadmit-{namespace}", "-o", "json",
                              check=False)
    return json.loads(found.stdout) if found.returncode == 0 else None


def _failing(apiserver, namespace: str, name: str) -> set[str]:
    report = _report(apiserver, namespace) or {}
    return {r["policy"] for r in report.get("results", []) if r["result"] == "fail"
            and r["resources"][0]["name"] == name}


def _violating(apiserver, namespace: str, name: str = "vllm") -> None:
    apiserver.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [GPU]}}}}))


def test_the_reports_controller_does_its_whole_job_with_the_shipped_rbac(apiserver, shipped, tmp_path):
    kubeconfig = _token_kubeconfig(apiserver, "aiadmit-reports-controller", tmp_path / "controller.kubeconfig")
    namespace = f"lp-reports-{uuid.uuid4().hex[:5]}"
    apiserver.kubectl("create", "namespace", namespace)
    controller = Controller(kubeconfig, tmp_path / "controller.log", "--leader-elect", "--lease-namespace",
                            OWN_NAMESPACE)
    try:
        wait_until(lambda: controller.metrics().get("aiadmit_reports_synced") == 1, 240,
                   "the controller, as its ServiceAccount, synced")
        # its Lease, in its namespace (the Role's create and get/update)
        lease = apiserver.kubectl_json("get", "lease", "-n", OWN_NAMESPACE, "aiadmit-reports-controller")
        assert lease["spec"]["holderIdentity"]
        # reports written (create), for a workload it watched
        _violating(apiserver, namespace)
        failing = wait_until(lambda: _failing(apiserver, namespace, "vllm"), 30, f"{namespace}/vllm in its report")
        # the policy exceptions watched: one lifts the finding
        apiserver.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyException",
            "metadata": {"name": "lp", "namespace": namespace},
            "spec": {"policies": sorted(failing), "match": {"names": ["vllm"]}, "reason": "least-privilege test",
                     "requestedBy": "e2e"}}))
        wait_until(lambda: not _failing(apiserver, namespace, "vllm"), 30, f"{namespace}/vllm lifted")
        # reports deleted (delete) with the namespace's last workload
        apiserver.kubectl("delete", "policyexception", "-n", namespace, "lp")
        apiserver.kubectl("delete", "deployment", "-n", namespace, "vllm")
        wait_until(lambda: _report(apiserver, namespace) is None, 30, f"aiadmit-{namespace} deleted")
        metrics = controller.metrics()
        assert not any(k.startswith("aiadmit_reports_watch_failures_total") and v for k, v in metrics.items()), metrics
        assert metrics["aiadmit_reports_write_errors_total"] == 0
        assert not FORBIDDEN.search(controller.text()), controller.text()[-3000:]
    finally:
        controller.stop()


def test_the_reports_controller_without_one_permission_says_so(apiserver, shipped, tmp_path):
    _, role = shipped
    name = "aiadmit-lp-controller-minus"
    _apply(apiserver, _less_one_rule(role, name, _without("policyexceptions", "aiadmit.dev")))
    kubeconfig = _token_kubeconfig(apiserver, name, tmp_path / "minus.kubeconfig")
    controller = Controller(kubeconfig, tmp_path / "minus.log")
    try:
        failures = 'aiadmit_reports_watch_failures_total{kind="PolicyException.aiadmit.dev"}'
        wait_until(lambda: controller.metrics().get(failures, 0) >= 1, 60, "the forbidden list counted")
        time.sleep(5)
        metrics = controller.metrics()
        assert metrics.get("aiadmit_reports_synced") == 0, "never synced without the exceptions it must enforce"
        assert [k for k, v in metrics.items() if k.startswith("aiadmit_reports_watch_failures_total") and v] == \
            [failures], metrics
        assert re.search(r"policyexceptions: .*(?<![\d.])403(?![\d.])", controller.text()), controller.text()[-3000:]
    finally:
        controller.stop()
        apiserver.kubectl("delete", "clusterrolebinding,clusterrole", name, "--ignore-not-found")


# --------------------------------------------------------------------------- the webhook

@pytest.fixture
def session_webhook_stopped(aiadmit_server):
    """The session's webhook (admin credentials) writes the same statuses: stopped meanwhile, so that what is
    written here is written by the ServiceAccount's server."""
    aiadmit_server.stop()
    try:
        yield
    finally:
        aiadmit_server.start()


def _serve_as(apiserver, workdir: Path, kubeconfig: Path) -> Webhook:
    hook = Webhook(apiserver, workdir)
    hook.args = [f"--kubeconfig={kubeconfig}" if a.startswith("--kubeconfig=") else a for a in hook.args]
    assert f"--kubeconfig={kubeconfig}" in hook.args
    return hook


def _https(hook: Webhook, path: str) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(hook.certs_dir / "ca.crt"))
    try:
        with urllib.request.urlopen(f"{hook.url}{path}", timeout=5, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _loaded(apiserver, kind: str, name: str, namespace: str | None = None):
    obj = apiserver.kubectl_json("get", kind, name, "-o", "json", *(["-n", namespace] if namespace else []))
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition["type"] == "Loaded" and condition.get("observedGeneration") == obj["metadata"]["generation"]:
            return condition
    return None


def _policy(name: str) -> dict:
    doc = yaml.safe_load((REPO / "examples" / "policies" / "team-label.yaml").read_text())
    doc["metadata"]["name"] = name
    doc["match"]["namespaces"] = [f"{name}-*"]  # only this test's (no such) namespaces: it judges nothing else
    doc["action"] = "audit"
    return doc


def test_the_webhook_does_its_whole_job_with_the_shipped_rbac(apiserver, shipped, session_webhook_stopped,
                                                              tmp_path):
    kubeconfig = _token_kubeconfig(apiserver, "aiadmit", tmp_path / "webhook.kubeconfig")
    hook = _serve_as(apiserver, tmp_path / "webhook", kubeconfig)
    name = f"lp-{uuid.uuid4().hex[:5]}"
    namespace = f"{name}-ns"
    apiserver.kubectl("create", "namespace", namespace)
    hook.start()  # returns once /readyz answers 200: the live context caches synced as the ServiceAccount
    try:
        status, body = _https(hook, "/metrics")
        ages = dict(re.findall(r'^aiadmit_context_cache_age_seconds\{resource="([^"]+)"\} (\S+)$', body, re.M))
        assert ages and all(float(age) >= 0 for age in ages.values()), ages  # every live fact synced
        apiserver.kubectl("apply", "-f", "-", input=json.dumps(_policy(name)))
        condition = wait_until(lambda: _loaded(apiserver, "policy", name), 20, f"Policy {name}'s status")
        assert condition["status"] == "True", condition
        apiserver.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyException",
            "metadata": {"name": "lp", "namespace": namespace},
            "spec": {"policies": [name], "reason": "least-privilege test", "requestedBy": "e2e"}}))
        condition = wait_until(lambda: _loaded(apiserver, "policyexception", "lp", namespace), 20,
                               "the exception's status")
        assert condition["status"] == "True", condition
        assert not FORBIDDEN.search(hook.logs()), hook.logs()[-3000:]
    finally:
        hook.stop()
        apiserver.kubectl("delete", "policyexception", "-n", namespace, "lp", "--ignore-not-found")
        apiserver.kubectl("delete", "policy", name, "--ignore-not-found")


def test_the_webhook_without_a_live_fact_permission_never_becomes_ready(apiserver, shipped, tmp_path):
    from serverproc import start_server

    role, _ = shipped
    name = "aiadmit-lp-webhook-nodes"
    _apply(apiserver, _less_one_rule(role, name, _without("nodes", "")))
    kubeconfig = _token_kubeconfig(apiserver, name, tmp_path / "minus.kubeconfig")
    hook = _serve_as(apiserver, tmp_path / "webhook", kubeconfig)
    try:
        with pytest.raises(TimeoutError) as raised:
            with start_server(tmp_path / "run", hook.args, workers=1, certs_dir=hook.certs_dir,
                              env={"POD_NAMESPACE": OWN_NAMESPACE}, port=hook.port, ready_timeout=60):
                pass
        assert "cluster context caches not synced yet" in str(raised.value), str(raised.value)[-2000:]
        logs = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "run").glob("serve-*.log"))
        assert re.search(r"context cache failed.*nodes.*API error 403", logs), logs[-3000:]
    finally:
        apiserver.kubectl("delete", "clusterrolebinding,clusterrole", name, "--ignore-not-found")


def test_the_webhook_without_the_status_rule_says_the_write_was_forbidden(apiserver, shipped, session_webhook_stopped,
                                                                         tmp_path):
    role, _ = shipped
    name = "aiadmit-lp-webhook-status"
    _apply(apiserver, _less_one_rule(role, name, _without("policies/status", "aiadmit.dev")))
    kubeconfig = _token_kubeconfig(apiserver, name, tmp_path / "minus.kubeconfig")
    hook = _serve_as(apiserver, tmp_path / "webhook", kubeconfig)
    policy = f"lp-{uuid.uuid4().hex[:5]}"
    hook.start()
    try:
        apiserver.kubectl("apply", "-f", "-", input=json.dumps(_policy(policy)))
        wait_until(lambda: re.search(r"status write failed.*Policy/" + policy + r".*403", hook.logs()), 30,
                   "the forbidden status write logged")
        assert _loaded(apiserver, "policy", policy) is None, "no status without the permission"
    finally:
        hook.stop()
        apiserver.kubectl("delete", "policy", policy, "--ignore-not-found")
        apiserver.kubectl("delete", "clusterrolebinding,clusterrole", name, "--ignore-not-found")
