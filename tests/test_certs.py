"""webhook/app/certs.py and `aiadmit certs`: real keys, real certificates, a real TLS handshake."""

import base64
import datetime as dt
import ipaddress
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from ruamel.yaml import YAML

from webhook.app import certs
from webhook.app.serving import server_context


def aiadmit(*args):
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True)


def load(path):
    return x509.load_pem_x509_certificate(open(path, "rb").read())


def test_generate_writes_a_ca_and_a_serving_pair_with_service_names(tmp_path):
    result = aiadmit("certs", "generate", "--out", str(tmp_path), "--service", "aiadmit",
                     "--namespace", "aiadmit-system", "--host", "10.0.0.7", "--host", "webhook.example")
    assert result.returncode == 0, result.stderr
    for name in ("ca.crt", "ca.key", "tls.crt", "tls.key"):
        assert (tmp_path / name).exists()
    assert stat.S_IMODE(os.stat(tmp_path / "tls.key").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "ca.key").st_mode) == 0o600
    ca, serving = load(tmp_path / "ca.crt"), load(tmp_path / "tls.crt")
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "aiadmit", "aiadmit.aiadmit-system", "aiadmit.aiadmit-system.svc", "aiadmit.aiadmit-system.svc.cluster.local",
        "webhook.example"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.7")]
    assert isinstance(serving.public_key(), ec.EllipticCurvePublicKey)
    assert serving.public_key().curve.name == "secp256r1"
    serving.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert serving.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == x509.ExtendedKeyUsage(
        [ExtendedKeyUsageOID.SERVER_AUTH])
    now = dt.datetime.now(dt.timezone.utc)
    assert 364 <= (serving.not_valid_after_utc - now).days <= 365
    assert 5 * 365 - 1 <= (ca.not_valid_after_utc - now).days <= 5 * 365


def test_generate_needs_a_name(tmp_path):
    result = aiadmit("certs", "generate", "--out", str(tmp_path))
    assert result.returncode == 2 and "--service" in result.stderr and "Traceback" not in result.stderr


def test_rotate_keeps_the_ca_and_the_names(tmp_path):
    certs.generate(str(tmp_path), ["svc.ns.svc", "127.0.0.1"])
    ca_before = (tmp_path / "ca.crt").read_bytes()
    old = load(tmp_path / "tls.crt")
    result = aiadmit("certs", "rotate", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    new = load(tmp_path / "tls.crt")
    assert (tmp_path / "ca.crt").read_bytes() == ca_before
    assert new.serial_number != old.serial_number and new.public_key() != old.public_key()
    assert certs.hosts_of(new) == certs.hosts_of(old)
    new.verify_directly_issued_by(load(tmp_path / "ca.crt"))
    assert certs.usable(str(tmp_path), ["svc.ns.svc", "127.0.0.1"]) is None


def test_rotate_without_a_ca_says_which_file(tmp_path):
    result = aiadmit("certs", "rotate", "--out", str(tmp_path))
    assert result.returncode == 2 and "ca.crt" in result.stderr and "Traceback" not in result.stderr


def test_usable_explains_why_not(tmp_path):
    certs.generate(str(tmp_path), ["localhost"])
    assert "does not name 127.0.0.1" in certs.usable(str(tmp_path), ["localhost", "127.0.0.1"])
    other = tmp_path / "other"
    certs.generate(str(other), ["localhost"])
    os.replace(other / "tls.crt", tmp_path / "tls.crt")
    os.replace(other / "tls.key", tmp_path / "tls.key")
    assert "not signed by" in certs.usable(str(tmp_path), ["localhost"])
    (tmp_path / "tls.key").write_bytes((other / "ca.key").read_bytes())
    assert "does not match" in certs.usable(str(tmp_path), ["localhost"])


def test_a_real_handshake_verifies_against_the_ca(tmp_path):
    certs.generate(str(tmp_path), certs.service_names("aiadmit", "aiadmit-system"))
    server = server_context(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        conn, _ = listener.accept()
        with server.wrap_socket(conn, server_side=True) as tls:
            tls.sendall(b"ok")

    thread = threading.Thread(target=serve)
    thread.start()
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with client.wrap_socket(raw, server_hostname="aiadmit.aiadmit-system.svc") as tls:
            assert tls.recv(2) == b"ok"
    thread.join(5)
    listener.close()


WEBHOOKS = """# our webhook configurations; this comment must survive
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: aiadmit
webhooks:
  - name: validate.aiadmit.dev
    clientConfig:
      service: {name: aiadmit, namespace: aiadmit-system, path: /validate}
    admissionReviewVersions: [v1]
    sideEffects: None
---
apiVersion: v1
kind: Service
metadata:
  name: aiadmit
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: aiadmit
webhooks:
  - name: mutate.aiadmit.dev
    clientConfig:
      caBundle: b2xk
      service: {name: aiadmit, namespace: aiadmit-system, path: /mutate}
    admissionReviewVersions: [v1]
    sideEffects: None
"""


def test_inject_writes_the_ca_bundle_in_place(tmp_path):
    manifest = tmp_path / "webhooks.yaml"
    manifest.write_text(WEBHOOKS)
    result = aiadmit("certs", "generate", "--out", str(tmp_path / "c"), "--service", "aiadmit",
                     "--inject", str(manifest))
    assert result.returncode == 0, result.stderr
    assert "injected caBundle into 2 webhook(s)" in result.stdout
    text = manifest.read_text()
    assert text.startswith("# our webhook configurations; this comment must survive")
    docs = list(YAML(typ="safe").load_all(text))
    expected = base64.b64encode((tmp_path / "c" / "ca.crt").read_bytes()).decode()
    assert [d["webhooks"][0]["clientConfig"]["caBundle"] for d in docs if "webhooks" in d] == [expected, expected]
    assert docs[1] == {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "aiadmit"}}


@pytest.mark.parametrize("content, why", [
    ("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n", "no Validating/MutatingWebhookConfiguration"),
    ("kind: ValidatingWebhookConfiguration\nwebhooks: {a: b}\n", "webhooks must be a list"),
    ("kind: [unclosed\n", "not valid YAML"),
])
def test_inject_refuses_files_it_cannot_handle(tmp_path, content, why):
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(content)
    result = aiadmit("certs", "generate", "--out", str(tmp_path / "c"), "--host", "x", "--inject", str(manifest))
    assert result.returncode == 2 and why in result.stderr and "Traceback" not in result.stderr
    assert manifest.read_text() == content
