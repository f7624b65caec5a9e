"""Start the real webhook (`aiadmit serve`) in a subprocess over TLS and talk to it as the API server would.

Reusable by any test (the e2e suite registers it with a real kube-apiserver):

    from tests.serverproc import start_server            # or: from serverproc import start_server
    with start_server(tmp_path, args=["--config", cfg]) as server:
        status, review = server.review("validate", review_dict)
        server.ca_file, server.port, server.url("/readyz"), server.logs()

`start_server` generates a CA and a serving pair for localhost/127.0.0.1 in
`<dir>/certs` (unless `certs_dir` is given), picks a free port, waits until
`/readyz` answers 200 over verified TLS, and stops the server (SIGTERM, then
SIGKILL) when the `with` block ends. Clients verify the certificate against the
generated CA; nothing switches verification off.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

REPO = Path(__file__).resolve().parent.parent
HOSTS = ["localhost", "127.0.0.1"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_certs(directory: Path) -> Path:
    from webhook.app import certs

    certs.generate(str(directory), HOSTS)
    return directory


class ServerProcess:
    def __init__(self, proc: subprocess.Popen, port: int, certs_dir: Path, log_path: Path):
        self.proc, self.port, self.certs_dir, self.log_path = proc, port, certs_dir, log_path
        self.ca_file = str(certs_dir / "ca.crt")
        self.cert_file = str(certs_dir / "tls.crt")
        self.key_file = str(certs_dir / "tls.key")
        self.client_pair: Optional[tuple[str, str]] = None  # (cert, key) every connection presents, when set

    def url(self, path: str = "/") -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)  # verifies chain and host name
        if self.client_pair:
            context.load_cert_chain(*self.client_pair)
        return context

    def connection(self, timeout: float = 15) -> http.client.HTTPSConnection:
        """A keep-alive connection (reuse it for many requests)."""
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ssl_context(), timeout=timeout)

    def request(self, method: str, path: str, body: Optional[bytes] = None, headers: Optional[dict] = None,
                connection: Optional[http.client.HTTPSConnection] = None) -> tuple[int, dict, bytes]:
        own = connection is None
        conn = connection or self.connection()
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            if own:
                conn.close()

    def review(self, endpoint: str, review: dict, connection=None) -> tuple[int, dict]:
        status, _, data = self.request("POST", f"/{endpoint}", json.dumps(review).encode(),
                                       {"Content-Type": "application/json"}, connection)
        return status, json.loads(data)

    def get_json(self, path: str) -> tuple[int, dict]:
        status, _, data = self.request("GET", path)
        return status, json.loads(data)

    def metrics(self) -> str:
        return self.request("GET", "/metrics")[2].decode()

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"aiadmit serve exited with {self.proc.returncode}:\n{self.logs()[-4000:]}")
            try:
                status, body = self.get_json("/readyz")
                if status == 200:
                    return
                last = str(body)
            except (OSError, ssl.SSLError, http.client.HTTPException, ValueError) as exc:
                last = repr(exc)
            time.sleep(0.2)
        raise TimeoutError(f"aiadmit serve not ready after {timeout}s ({last}):\n{self.logs()[-4000:]}")

    def stop(self, timeout: float = 30) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


@contextlib.contextmanager
def start_server(directory: Path, args: Sequence[str] = (), workers: int = 1,
                 certs_dir: Optional[Path] = None, env: Optional[dict] = None,
                 ready_timeout: float = 60, port: Optional[int] = None) -> Iterator[ServerProcess]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    certs_dir = Path(certs_dir) if certs_dir else make_certs(directory / "certs")
    port = port or free_port()  # a fixed port lets a test restart the server behind the same webhook URL
    log_path = directory / f"serve-{port}.log"
    command = [sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--cert-file", str(certs_dir / "tls.crt"), "--key-file", str(certs_dir / "tls.key"),
               "--workers", str(workers), *args]
    environment = {**os.environ, **(env or {})}
    environment.pop("KUBERNETES_SERVICE_HOST", None)
    environment.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT, env=environment)
    server = ServerProcess(proc, port, certs_dir, log_path)
    try:
        server.wait_ready(ready_timeout)
        yield server
    finally:
        server.stop()


def make_review(obj: Optional[dict], operation: str = "CREATE", old: Optional[dict] = None,
                uid: Optional[str] = None, username: str = "alice@example.com", dry_run: bool = False,
                sub_resource: Optional[str] = None, namespace: Optional[str] = None) -> dict:
    """An AdmissionReview v1 as the API server sends it for `obj` (kind and resource filled from the object)."""
    import uuid

    source = obj if isinstance(obj, dict) else (old if isinstance(old, dict) else {})
    api_version = str(source.get("apiVersion", "v1"))
    group, _, version = api_version.rpartition("/")
    kind = str(source.get("kind", ""))
    meta = source.get("metadata") if isinstance(source.get("metadata"), dict) else {}
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": kind.lower() + "s"}
    request = {"uid": uid or str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": gvk,
               "requestResource": gvr, "name": meta.get("name", ""),
               "namespace": namespace if namespace is not None else meta.get("namespace", ""),
               "operation": operation, "userInfo": {"username": username, "groups": ["system:authenticated"]},
               "object": obj, "oldObject": old, "dryRun": dry_run}
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def write_slow_policy(directory: Path, rules: int = 20, size: int = 450) -> Path:
    """`rules` valid policies (`slow-check-0`, ...) on ConfigMaps labelled `slow`, each rule ~size² CEL steps.

    The cel library holds the GIL inside one program, and the engine runs the rules of one policy as one program
    (its fast path), so slowness is spread over many small policies: the time budget and graceful shutdown are
    tested with real evaluation, not with sleeps, and the deadline can fire between two of them.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    xs = json.dumps(list(range(size)))
    for i in range(rules):
        (directory / f"slow-check-{i}.yaml").write_text(f"""apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: slow-check-{i}
summary: A deliberately slow policy, for time-budget and shutdown tests.
why: Tests need a review that takes a measurable time.
remediation: Label the object slow=false.
action: deny
match:
  kinds: [ConfigMap]
target: object
params:
  xs: {xs}
rules:
  - name: slow
    when: has(object.metadata.labels) && "slow" in object.metadata.labels
    expression: params.xs.all(a, params.xs.all(b, a + b + {i} >= 0)) && object.metadata.labels["slow"] == "false"
    message: rule {i} is slow and the label slow is not false
    path: /metadata/labels
""")
    return directory


def slow_configmap(name: str = "slow", slow: str = "true") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ml",
                                                                   "labels": {"slow": slow}}}
