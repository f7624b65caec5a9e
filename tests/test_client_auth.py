"""Only the API server may send reviews (issue 21, invariant (f)): with --client-ca-file the webhook asks every
client for a certificate and answers /validate and /mutate only to one that those CAs signed; the kubelet's probes
and Prometheus, which present none, still reach /healthz, /readyz and /metrics. A real server over real TLS."""

import http.client
import socket
import ssl

import pytest

from serverproc import make_review, start_server
from webhook.app import certs

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "t"},
       "spec": {"containers": [{"name": "c", "image": "x"}]}}


def _pair(directory, name: str, ca: certs.Pair, common_name: str) -> tuple[str, str]:
    pair = certs.new_client(ca, common_name)
    paths = str(directory / f"{name}.crt"), str(directory / f"{name}.key")
    certs.write_pair(pair, *paths)
    return paths


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    directory = tmp_path_factory.mktemp("client-auth")
    client_ca = certs.new_ca("kube-apiserver webhook clients")
    with open(directory / "client-ca.crt", "wb") as handle:
        handle.write(certs.cert_pem(client_ca.cert))
    other_ca = certs.new_ca("someone else")
    with start_server(directory, args=["--no-cluster", "--client-ca-file", str(directory / "client-ca.crt")]) as srv:
        srv.pairs = {"apiserver": _pair(directory, "apiserver", client_ca, "kube-apiserver"),
                     "stranger": _pair(directory, "stranger", other_ca, "kube-apiserver")}
        yield srv


def _with(server, pair):
    server.client_pair = server.pairs[pair] if pair else None
    return server


def test_the_api_servers_certificate_gets_reviews_answered(server):
    status, review = _with(server, "apiserver").review("validate", make_review(POD))
    assert status == 200 and "response" in review
    status, review = server.review("mutate", make_review(POD))
    assert status == 200 and review["response"]["allowed"] is True


@pytest.mark.parametrize("endpoint", ["validate", "mutate"])
def test_no_certificate_is_refused_before_the_body_is_read(server, endpoint):
    status, _, data = _with(server, None).request("POST", f"/{endpoint}", b"{}", {"Content-Type": "application/json"})
    assert status == 403 and b"a client certificate is required for reviews" in data
    assert 'aiadmit_connections_closed_total{reason="no-client-cert"}' in server.metrics()


@pytest.mark.parametrize("path", ["/%76alidate", "/validate/", "//mutate", "/healthz/../validate", "/nowhere"])
def test_every_other_path_needs_the_certificate_too(server, path):
    """Flask decodes what the HTTP layer sees: only the exact paths of the probes and metrics are open."""
    status, _, data = _with(server, None).request("POST", path, b"{}", {"Content-Type": "application/json"})
    assert status == 403 and b"a client certificate is required" in data


def test_a_body_never_sent_is_not_waited_for(server):
    """The refusal comes after the headers: a client announcing 6 MB and sending none of it is answered at once."""
    context = ssl.create_default_context(cafile=server.ca_file)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 6000000\r\n\r\n")
            answer = tls.recv(4096)
    assert answer.startswith(b"HTTP/1.1 403 ")


def test_a_certificate_of_another_ca_ends_the_handshake(server):
    _with(server, "stranger")
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)):
        server.review("validate", make_review(POD))


def test_probes_and_metrics_need_no_certificate(server):
    _with(server, None)
    assert server.get_json("/healthz")[0] == 200
    assert server.get_json("/readyz")[0] == 200
    assert "aiadmit_" in server.metrics()


def test_a_client_ca_file_that_is_not_a_certificate_stops_the_start(tmp_path):
    import subprocess
    import sys

    from serverproc import REPO, make_certs

    make_certs(tmp_path / "certs")
    (tmp_path / "bad-ca.crt").write_text("not a certificate\n")
    done = subprocess.run([sys.executable, "-m", "webhook", "serve", "--no-cluster", "--host", "127.0.0.1",
                           "--port", "0", "--cert-file", str(tmp_path / "certs/tls.crt"),
                           "--key-file", str(tmp_path / "certs/tls.key"),
                           "--client-ca-file", str(tmp_path / "bad-ca.crt")],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert done.returncode == 2 and "bad-ca.crt" in done.stderr


def test_certs_client_writes_what_the_documented_setup_uses(tmp_path):
    """docs/operations.md, "Authenticating the API server": `aiadmit certs client`, then the webhook with the CA and
    a client with the pair, as the API server's admission kubeconfig presents it."""
    import subprocess
    import sys

    from serverproc import REPO

    done = subprocess.run([sys.executable, "-m", "webhook", "certs", "client", "--out", str(tmp_path / "client")],
                          capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "client/client.key").stat().st_mode & 0o077 == 0
    with start_server(tmp_path / "server", args=["--no-cluster",
                                                  "--client-ca-file", str(tmp_path / "client/client-ca.crt")]) as srv:
        srv.client_pair = (str(tmp_path / "client/client.crt"), str(tmp_path / "client/client.key"))
        status, review = srv.review("validate", make_review(POD))
        assert status == 200 and "response" in review
        srv.client_pair = None
        assert srv.request("POST", "/validate", b"{}", {"Content-Type": "application/json"})[0] == 403
