"""The real server (`aiadmit serve`, gunicorn, 2 workers) over real TLS with a generated CA, verified by the client."""

import base64
import copy
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

import jsonpatch
import pytest
from cryptography import x509

from serverproc import make_review, slow_configmap, start_server, write_slow_policy

from objects import OWNER, POLICY_FILES, RS_CONTROLLER, deployment, gpu_pod

POLICY_ARGS = [arg for path in POLICY_FILES for arg in ("--policies", path)]

CONFIG = """apiVersion: aiadmit.dev/v1alpha1
kind: Config
exceptions:
  - name: legacy-trainers
    policies: [shm-sized]
    namespaces: [ml]
    names: ["legacy-*"]
    reason: migrating to sized /dev/shm by next quarter
"""
CONTEXT = """apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: v1
kind: Namespace
metadata: {name: relaxed, labels: {aiadmit.dev/enforcement: warn}}
---
apiVersion: v1
kind: Namespace
metadata: {name: observed, labels: {aiadmit.dev/enforcement: audit}}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    (directory / "config.yaml").write_text(CONFIG)
    (directory / "context.yaml").write_text(CONTEXT)
    with start_server(directory, [*POLICY_ARGS, "--config", str(directory / "config.yaml"),
                                  "--context", str(directory / "context.yaml")], workers=2) as running:
        yield running


def decode_patch(response):
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def test_deny_over_tls(server):
    review = json.load(open("examples/pytorchjob-gpu.json"))
    status, body = server.review("validate", review)
    assert status == 200 and body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == review["request"]["uid"] and response["allowed"] is False
    assert response["status"]["code"] == 403
    assert "\nshm-sized: " in response["status"]["message"]


def test_allow_and_warn_over_tls(server):
    status, body = server.review("validate", make_review(gpu_pod()))
    assert status == 200 and body["response"] == {"uid": body["response"]["uid"], "allowed": True}
    relaxed = gpu_pod(shm=False, namespace="relaxed")
    status, body = server.review("validate", make_review(relaxed))
    assert body["response"]["allowed"] is True
    assert any(w.startswith("shm-sized: ") for w in body["response"]["warnings"])
    observed = gpu_pod(shm=False, namespace="observed")
    status, body = server.review("validate", make_review(observed))
    assert body["response"]["allowed"] is True and "warnings" not in body["response"]


def test_mutate_patch_applies_and_is_idempotent_over_tls(server):
    review = json.load(open("examples/pytorchjob-gpu.json"))
    status, body = server.review("mutate", review)
    patched = jsonpatch.apply_patch(review["request"]["object"], decode_patch(body["response"]))
    status, again = server.review("mutate", make_review(patched))
    assert status == 200 and "patch" not in again["response"]
    status, checked = server.review("validate", make_review(patched))
    assert "\nshm-sized: " not in checked["response"].get("status", {}).get("message", "")


def test_update_semantics_over_tls(server):
    old = deployment(shm=False)
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 8
    status, body = server.review("validate", make_review(scaled, "UPDATE", old))
    assert body["response"]["allowed"] is True
    assert any("already present before this update" in w for w in body["response"]["warnings"])
    worse = copy.deepcopy(old)
    del worse["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]
    status, body = server.review("validate", make_review(worse, "UPDATE", old))
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"].count("\n") >= 1


def test_dry_run_and_owned_pods_over_tls(server):
    pod = gpu_pod(shm=False)
    _, wet = server.review("validate", make_review(pod, uid="u-1"))
    _, dry = server.review("validate", make_review(pod, uid="u-1", dry_run=True))
    assert wet == dry and wet["response"]["allowed"] is False
    owned = gpu_pod(shm=False, owner=OWNER)
    _, by_controller = server.review("validate", make_review(owned, username=RS_CONTROLLER))
    _, forged = server.review("validate", make_review(owned, username="mallory"))
    assert by_controller["response"]["allowed"] is True and forged["response"]["allowed"] is False


def test_exceptions_over_tls(server):
    _, body = server.review("validate", make_review(gpu_pod("legacy-7", shm=False)))
    assert body["response"]["allowed"] is True


def test_bad_input_over_tls_then_still_healthy(server):
    conn = server.connection()
    for body, content_type, expected in [(b"{", "application/json", 400), (b"[]", "application/json", 400),
                                         (b"{}", "application/json", 400),
                                         (b"[" * 20000 + b"]" * 20000, "application/json", 400),
                                         (b"{}", "text/plain", 415)]:
        status, _, data = server.request("POST", "/validate", body, {"Content-Type": content_type})
        assert status == expected and json.loads(data)["error"]
    # over the limit: refused from the headers, before 7 MiB are read (so send only the start of the body)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with server.ssl_context().wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n{\"a\": \"" % (7 * 1024 * 1024))
            response = http.client.HTTPResponse(tls)
            response.begin()
            assert response.status == 413 and "over" in json.loads(response.read())["error"]
    for _ in range(3):  # a kept-alive connection keeps working
        status, _, _ = server.request("GET", "/healthz", connection=conn)
        assert status == 200
    assert server.get_json("/readyz")[0] == 200
    assert server.alive()


def test_metrics_aggregate_both_workers(server):
    for _ in range(6):
        server.review("validate", make_review(gpu_pod()))  # new connection each: both workers serve some
    text = server.metrics()
    assert "aiadmit_admission_requests_total{" in text
    assert "aiadmit_admission_duration_seconds_bucket{" in text
    assert "aiadmit_policy_set_generation{" in text


def test_logs_are_json_lines_with_the_uid(server):
    server.review("validate", make_review(gpu_pod(env=[{"name": "API_KEY", "value": "zz-secret-zz"}]),
                                          uid="tls-log-uid"))
    time.sleep(0.2)
    lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    mine = [entry for entry in lines if entry.get("uid") == "tls-log-uid"]
    assert mine and mine[0]["kind"] == "Pod" and mine[0]["outcome"] in ("allowed", "warned")
    assert "zz-secret-zz" not in server.logs()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls_is_verified_and_modern(server):
    from webhook.app.serving import server_context

    assert server_context(server.cert_file, server.key_file).minimum_version == ssl.TLSVersion.TLSv1_2
    with pytest.raises(ssl.SSLCertVerificationError):
        http.client.HTTPSConnection("127.0.0.1", server.port, context=ssl.create_default_context(),
                                    timeout=5).request("GET", "/healthz")
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        context = server.ssl_context()
        context.minimum_version = context.maximum_version = version
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                assert tls.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(server.ca_file)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        with pytest.raises(ssl.SSLError):
            old.wrap_socket(raw, server_hostname="localhost")


# ---------------------------------------------------------------------- rotation
def serial_seen(server) -> int:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        with server.ssl_context().wrap_socket(raw, server_hostname="localhost") as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_certificate_rotation_while_a_client_keeps_sending(tmp_path):
    with start_server(tmp_path, [*POLICY_ARGS, "--reload-interval", "0.3"], workers=2) as server:
        before = serial_seen(server)
        failures, answered, stop = [], [0], threading.Event()
        review = make_review(gpu_pod())

        def client(reuse: bool):
            conn = server.connection() if reuse else None
            while not stop.is_set():
                try:
                    status, body = server.review("validate", review, connection=conn)
                    assert status == 200 and body["response"]["allowed"] is True
                    answered[0] += 1
                except Exception as exc:  # any failure is a dropped request
                    failures.append(repr(exc))
                    if reuse:
                        conn = server.connection()

        threads = [threading.Thread(target=client, args=(reuse,)) for reuse in (True, False, False)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        rotated = subprocess.run([sys.executable, "-m", "webhook", "certs", "rotate", "--out",
                                  str(server.certs_dir)], capture_output=True, text=True)
        assert rotated.returncode == 0, rotated.stderr
        new_serial = x509.load_pem_x509_certificate(open(server.cert_file, "rb").read()).serial_number
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and serial_seen(server) != new_serial:
            time.sleep(0.2)
        time.sleep(1.0)
        stop.set()
        for thread in threads:
            thread.join(20)
        assert new_serial != before and serial_seen(server) == new_serial
        assert not failures, failures[:5]
        assert answered[0] > 20
        assert 'aiadmit_certificate_reloads_total{outcome="success"}' in server.metrics()


def test_a_broken_certificate_file_keeps_the_old_one(tmp_path):
    with start_server(tmp_path, ["--reload-interval", "0.2"]) as server:
        before = serial_seen(server)
        with open(server.cert_file, "w") as handle:
            handle.write("-----BEGIN CERTIFICATE-----\nnot a cert\n")
        time.sleep(0.8)
        assert serial_seen(server) == before  # first new connection triggers the check, then still the old cert
        assert serial_seen(server) == before
        assert "certificate reload rejected" in server.logs()


# ---------------------------------------------------------------------- policy reload
def test_policy_reload_rejects_a_broken_file_and_takes_a_good_one(tmp_path):
    policies = tmp_path / "policies"
    policies.mkdir()
    for path in POLICY_FILES:
        shutil.copy(path, policies)
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\n")
    with start_server(tmp_path, ["--policies", str(policies), "--config", str(config),
                                 "--reload-interval", "0.3"]) as server:
        review = make_review(gpu_pod(shm=False))
        assert server.review("validate", review)[1]["response"]["allowed"] is False
        shm = policies / "shm-sized.yaml"
        good = shm.read_text()
        shm.write_text(good.replace("rules:", "rules: [oops", 1))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and 'aiadmit_policy_reloads_total{outcome="failure"}' not in server.metrics():
            time.sleep(0.2)
        assert 'aiadmit_policy_reloads_total{outcome="failure"} 1.0' in server.metrics()
        assert "policy reload rejected" in server.logs() and "shm-sized.yaml" in server.logs()
        status, body = server.review("validate", review)
        assert status == 200 and body["response"]["allowed"] is False  # the old set keeps serving
        assert "\nshm-sized: " in body["response"]["status"]["message"]
        assert server.get_json("/readyz") == (200, {"status": "ok", "reason": "ok", "generation": 0})

        shm.write_text(good)
        config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\npolicies:\n  shm-sized: {action: warn}\n")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and server.get_json("/readyz")[1]["generation"] < 1:
            time.sleep(0.2)
        assert server.get_json("/readyz")[1]["generation"] >= 1
        body = server.review("validate", review)[1]["response"]
        assert body["allowed"] is True and any(w.startswith("shm-sized: ") for w in body["warnings"])


# ---------------------------------------------------------------------- shutdown
def test_graceful_shutdown_finishes_in_flight_reviews(tmp_path):
    policies = tmp_path / "slow"
    write_slow_policy(policies, rules=40, size=300)  # about a second of real evaluation
    with start_server(tmp_path, ["--policies", str(policies), "--budget", "30"]) as server:
        result = {}

        def send():
            try:
                result["answer"] = server.review("validate", make_review(slow_configmap()))
            except Exception as exc:
                result["error"] = repr(exc)

        thread = threading.Thread(target=send)
        started = time.monotonic()
        thread.start()
        time.sleep(0.3)
        server.proc.send_signal(signal.SIGTERM)
        thread.join(60)
        status, body = result["answer"]
        assert status == 200 and body["response"]["allowed"] is False
        assert "slow-check" in body["response"]["status"]["message"]
        assert server.proc.wait(30) == 0
        assert time.monotonic() - started > 0.3
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server.port), timeout=2).close()


def _metrics_dirs(directory) -> list:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("aiadmit-metrics-"))


def test_the_metrics_directory_outlives_a_worker_and_goes_with_the_server(tmp_path):
    # The arbiter makes a directory for the workers' shared metrics; a worker that exits (and is replaced) must
    # not remove it under the others, and the server removes it when it stops.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    with start_server(tmp_path / "srv", args=["--no-cluster"], workers=2, env={"TMPDIR": str(scratch)}) as server:
        [made] = _metrics_dirs(scratch)
        worker = int(subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True)
                     .stdout.split()[0])
        server.review("validate", make_review(gpu_pod()))
        os.kill(worker, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the arbiter replaces it
            children = subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True)
            if len(children.stdout.split()) == 2 and str(worker) not in children.stdout.split():
                break
            time.sleep(0.2)
        assert _metrics_dirs(scratch) == [made]
        for _ in range(4):
            assert server.review("validate", make_review(gpu_pod()))[0] == 200
        assert "aiadmit_admission_requests_total{" in server.metrics()
    assert server.proc.returncode is not None
    assert _metrics_dirs(scratch) == []
