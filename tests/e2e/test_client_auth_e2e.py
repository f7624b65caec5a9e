"""The API server authenticates itself to the webhook (issue 21, invariant (f); docs/operations.md, "Authenticating
the API server"), on a real kube-apiserver of its own: started with `--admission-control-config-file` whose
kubeconfig gives the webhook's address a client certificate from `aiadmit certs client`, and `aiadmit serve
--client-ca-file` with that CA. A pod create reaches the policies through the authenticated webhook; a second
webhook configuration for the same server under another address (no kubeconfig user for it, so no certificate) is
refused by aiadmit, and the API server fails the create as its failurePolicy says."""

from __future__ import annotations

import base64
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


def _e2e_helpers():
    """tests/e2e/conftest.py, loaded by path (`import conftest` could be tests/conftest.py in the whole suite)."""
    spec = importlib.util.spec_from_file_location("aiadmit_e2e_plane", Path(__file__).with_name("conftest.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_helpers = _e2e_helpers()
ControlPlane, E2ESetupError, KubectlError = _helpers.ControlPlane, _helpers.E2ESetupError, _helpers.KubectlError
ensure_binaries = _helpers.ensure_binaries

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))
from serverproc import REPO, free_port, make_certs, start_server  # noqa: E402

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "registry.example/x:1",
                                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}


def _webhook(name: str, url: str, ca_pem: bytes) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": f"{name}.aiadmit.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Fail", "timeoutSeconds": 5,
                          "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["pods"]}]}]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("client-auth")
    try:
        bin_dir = ensure_binaries(work / "build.log")
    except E2ESetupError as exc:
        pytest.fail(str(exc), pytrace=False)
    done = subprocess.run([sys.executable, "-m", "webhook", "certs", "client", "--out", str(work / "client")],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert done.returncode == 0, done.stderr
    port = free_port()
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "users": [
        {"name": f"127.0.0.1:{port}", "user": {"client-certificate": str(work / "client/client.crt"),
                                               "client-key": str(work / "client/client.key")}}]}
    (work / "webhook-kubeconfig.yaml").write_text(yaml.safe_dump(kubeconfig))
    plugin = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
              "kubeConfigFile": str(work / "webhook-kubeconfig.yaml")}
    admission = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": [
        {"name": "ValidatingAdmissionWebhook", "configuration": plugin},
        {"name": "MutatingAdmissionWebhook", "configuration": plugin}]}
    (work / "admission.yaml").write_text(yaml.safe_dump(admission))
    (work / "plane").mkdir()
    plane = ControlPlane(bin_dir, work / "plane")
    plane.extra_args = [f"--admission-control-config-file={work / 'admission.yaml'}"]
    try:
        plane.start()
    except E2ESetupError as exc:
        plane.stop()
        pytest.fail(f"control plane failed to start:\n{exc}", pytrace=False)
    certs = make_certs(work / "serving")
    try:
        with start_server(work / "server", port=port, certs_dir=certs,
                          args=["--no-cluster", "--client-ca-file", str(work / "client/client-ca.crt")]) as server:
            ca_pem = (certs / "ca.crt").read_bytes()
            yield plane, server, ca_pem
    finally:
        plane.stop()


def _apply(plane: ControlPlane, obj: dict) -> None:
    plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(obj))


def test_the_api_server_presents_its_certificate_and_the_policies_judge_the_pod(cluster):
    plane, server, ca_pem = cluster
    _apply(plane, _webhook("authenticated", f"https://127.0.0.1:{server.port}/validate", ca_pem))
    try:
        with pytest.raises(KubectlError) as denied:
            plane.kubectl("create", "-f", "-", input=yaml.safe_dump(POD))
        assert "aiadmit denied Pod default/gpu" in denied.value.stderr
        assert "without requesting a device" in denied.value.stderr  # the device-variables policy's message
    finally:
        plane.kubectl("delete", "validatingwebhookconfiguration", "authenticated", "--ignore-not-found")


def test_without_the_certificate_the_webhook_refuses_and_the_create_fails_closed(cluster):
    plane, server, ca_pem = cluster
    # localhost:PORT has no user in the admission kubeconfig: the API server calls it without a certificate.
    _apply(plane, _webhook("anonymous", f"https://localhost:{server.port}/validate", ca_pem))
    try:
        with pytest.raises(KubectlError) as failed:
            plane.kubectl("create", "-f", "-", input=yaml.safe_dump(POD))
        # What the API server says of a 403 that is not an AdmissionReview: "failed to call webhook: unknown"
        assert 'failed calling webhook "anonymous.aiadmit.dev"' in failed.value.stderr
        assert 'aiadmit_connections_closed_total{reason="no-client-cert"}' in server.metrics()  # refused by us
    finally:
        plane.kubectl("delete", "validatingwebhookconfiguration", "anonymous", "--ignore-not-found")
