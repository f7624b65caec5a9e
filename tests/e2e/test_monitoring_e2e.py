"""The alert AiadmitWebhookUnreachable reads a metric of the kube-apiserver, not of aiadmit: the real API server
(v1.37.2, the e2e control plane) counts a call it could not make to a webhook named validate.aiadmit.dev under
exactly the name and labels the PrometheusRule selects (manifests/components/monitoring/prometheusrule.yaml)."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "manifests" / "components" / "monitoring" / "prometheusrule.yaml"


def _alert(name: str) -> dict:
    spec = yaml.safe_load(RULES.read_text())["spec"]
    (alert,) = [r for g in spec["groups"] for r in g["rules"] if r.get("alert") == name]
    return alert


def test_an_unreachable_webhook_is_counted_as_the_alert_expects(apiserver):
    expr = _alert("AiadmitWebhookUnreachable")["expr"]
    (selector,) = re.findall(r"apiserver_admission_webhook_rejection_count\{([^}]*)\}", expr.replace("\n", " "))
    wanted = dict(re.findall(r'(\w+)="([^"]*)"', selector))
    assert wanted == {"name": "validate.aiadmit.dev", "error_type": "calling_webhook_error"}, wanted

    probe = uuid.uuid4().hex[:6]
    namespace, config = f"aiadmit-monitoring-{probe}", f"aiadmit-monitoring-probe-{probe}"
    apiserver.kubectl("create", "namespace", namespace)
    apiserver.kubectl("label", "namespace", namespace, f"aiadmit-monitoring-probe={probe}")
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": config},
        "webhooks": [{
            "name": "validate.aiadmit.dev",
            # nothing listens on port 1: the API server cannot call it (connection refused), as when every
            # replica is gone
            "clientConfig": {"url": "https://127.0.0.1:1/validate",
                             "caBundle": base64.b64encode(apiserver.pki.ca_pem).decode()},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"aiadmit-monitoring-probe": probe}},
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2}]}
    try:
        apiserver.kubectl("apply", "-f", "-", input=json.dumps(webhook))
        deadline, refused = time.monotonic() + 30, None
        while time.monotonic() < deadline:  # the API server picks the new configuration up within a second or so
            done = apiserver.kubectl("-n", namespace, "create", "configmap", f"probe-{time.monotonic_ns()}",
                                     check=False)
            if done.returncode != 0:
                refused = done.stderr
                break
            time.sleep(0.5)
        assert refused and "failed calling webhook" in refused, refused
        metrics = apiserver.kubectl("get", "--raw", "/metrics").stdout
        counted = [line for line in metrics.splitlines()
                   if line.startswith("apiserver_admission_webhook_rejection_count{")
                   and all(f'{k}="{v}"' in line for k, v in wanted.items())]
        assert counted and all(float(line.rsplit(" ", 1)[1]) >= 1 for line in counted), \
            [line for line in metrics.splitlines() if "webhook_rejection" in line][:10]
        assert any('type="validating"' in line for line in counted), counted
    finally:
        apiserver.kubectl("delete", "validatingwebhookconfiguration", config, "--ignore-not-found", check=False)
        apiserver.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
