"""aiadmit served to the e2e kube-apiserver the way manifests/base deploys it, minus the cluster network.

The admission scenarios (test_admission_e2e.py) must exercise what we ship, not a hand-written stand-in, so
everything here is taken from `kubectl kustomize manifests/base` (the pinned kubectl of the e2e build):

* the ValidatingWebhookConfiguration and MutatingWebhookConfiguration, unchanged (rules, namespaceSelector,
  failurePolicy, timeoutSeconds, matchPolicy, reinvocationPolicy) except `clientConfig`: the e2e API server has
  no Service network and no kube-proxy, so it calls `https://127.0.0.1:<port>/validate|/mutate` directly;
  the `caBundle` is the CA that `aiadmit certs generate` made for the serving pair;
* the server's command line: the Deployment container's `args`, with each volume mount path mapped to a local
  directory holding the same files (the rendered config and policies ConfigMaps; the certs directory for the
  Secret), `--port` set to a free port and `--in-cluster` replaced by `--kubeconfig` of the test API server, so
  that the live cluster context (namespace labels, ResourceQuotas, PriorityClasses, ...) is synced from it;
* `POD_NAMESPACE=aiadmit-system`, as the downward API would set it.

The process itself is started by tests/serverproc.py (the same helper as the unit tests), on a fixed port so that
a stopped server can be started again behind the same webhook URL.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BASE = REPO / "manifests" / "base"
OWN_NAMESPACE = "aiadmit-system"
HOSTS = ("127.0.0.1", "localhost")

sys.path.insert(0, str(HERE.parent))  # tests/: serverproc
from serverproc import ServerProcess, free_port, start_server  # noqa: E402


class Rendered:
    """The objects of `kubectl kustomize manifests/base`."""

    def __init__(self, kubectl_bin: Path):
        proc = subprocess.run([str(kubectl_bin), "kustomize", str(BASE)], capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"kubectl kustomize {BASE} failed ({proc.returncode}):\n{proc.stderr}")
        self.objects = [o for o in yaml.safe_load_all(proc.stdout) if o]

    def one(self, kind: str, name: str) -> dict:
        """The object of that kind whose name is `name` (or, for generated ConfigMaps, starts with `name-`)."""
        found = [o for o in self.objects if o["kind"] == kind
                 and (o["metadata"]["name"] == name or o["metadata"]["name"].startswith(name + "-"))]
        if len(found) != 1:
            raise RuntimeError(f"manifests/base renders {len(found)} {kind} named {name!r}, expected one")
        return found[0]

    def webhook_configurations(self, base_url: str, ca_pem: bytes) -> list[dict]:
        """Both webhook configurations, pointed at `base_url` + each webhook's service path."""
        out = []
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            cfg = copy.deepcopy(self.one(kind, "aiadmit"))
            for hook in cfg["webhooks"]:
                path = hook["clientConfig"]["service"].get("path", "/")
                hook["clientConfig"] = {"url": base_url + path, "caBundle": base64.b64encode(ca_pem).decode()}
            out.append(cfg)
        return out

    def server_args(self, files_dir: Path, certs_dir: Path, port: int, kubeconfig: Path) -> list[str]:
        """The Deployment container's args, runnable here (see the module docstring)."""
        pod = self.one("Deployment", "aiadmit")["spec"]["template"]["spec"]
        container = pod["containers"][0]
        volumes = {v["name"]: v for v in pod["volumes"]}
        mapped: dict[str, str] = {}
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            if "configMap" in volume:
                target = files_dir / mount["name"]
                target.mkdir(parents=True, exist_ok=True)
                data = self.one("ConfigMap", volume["configMap"]["name"])["data"]
                for key, text in data.items():
                    (target / key).write_text(text)
                mapped[mount["mountPath"]] = str(target)
            elif "secret" in volume:  # the TLS Secret: tls.crt and tls.key, as `aiadmit certs` names them
                mapped[mount["mountPath"]] = str(certs_dir)
        args = []
        for arg in container["args"]:
            if arg == "--in-cluster":
                arg = f"--kubeconfig={kubeconfig}"
            elif arg.startswith("--port="):
                arg = f"--port={port}"
            else:
                for inside in sorted(mapped, key=len, reverse=True):
                    if f"={inside}" in arg:
                        arg = arg.replace(f"={inside}", f"={mapped[inside]}", 1)
                        break
            args.append(arg)
        return args


def aiadmit_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The `aiadmit` CLI of this checkout (python -m webhook), as a user runs it."""
    proc = subprocess.run([sys.executable, "-m", "webhook", *args], cwd=str(REPO), capture_output=True, text=True,
                          timeout=180)
    if check and proc.returncode != 0:
        raise RuntimeError(f"aiadmit {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def served_certificate(port: int, ca_file: str) -> bytes:
    """DER of the certificate a new TLS connection to 127.0.0.1:port is given (verified against ca_file)."""
    context = ssl.create_default_context(cafile=ca_file)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            return tls.getpeercert(binary_form=True)


def established_peers(port: int) -> set[tuple[str, int]]:
    """(remote address, remote port) of the ESTABLISHED TCP connections to local `port`, from /proc/net/tcp{,6}:
    which connections the API server holds to the webhook (a new remote port is a new connection)."""
    peers = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == port:
                address, remote_port = remote.rsplit(":", 1)
                peers.add((address, int(remote_port, 16)))
    return peers


class Webhook:
    """`aiadmit serve` registered with a ControlPlane (tests/e2e/conftest.py); start/stop/rotate for the tests."""

    def __init__(self, apiserver: Any, workdir: Path, workers: int = 2):
        self.apiserver, self.workdir, self.workers = apiserver, Path(workdir), workers
        self.rendered = Rendered(apiserver.kubectl_bin)
        self.certs_dir = self.workdir / "certs"
        aiadmit_cli("certs", "generate", "--out", str(self.certs_dir), *[a for h in HOSTS for a in ("--host", h)])
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.args = self.rendered.server_args(self.workdir / "mounts", self.certs_dir, self.port,
                                              apiserver.kubeconfig)
        self.server: Optional[ServerProcess] = None
        self._stack: Optional[contextlib.ExitStack] = None
        self._runs = 0
        self.registered_after: Optional[float] = None  # seconds from register() until the API server called it

    # -- the process ------------------------------------------------------------------------------------------
    def start(self) -> ServerProcess:
        if self.server is not None:
            raise RuntimeError("the webhook is already running")
        self._runs += 1
        stack = contextlib.ExitStack()
        try:
            self.server = stack.enter_context(start_server(
                self.workdir / f"run-{self._runs}", self.args, workers=self.workers, certs_dir=self.certs_dir,
                env={"POD_NAMESPACE": OWN_NAMESPACE}, port=self.port, ready_timeout=120))
        except BaseException:
            stack.close()
            raise
        self._stack = stack
        return self.server

    def stop(self) -> Optional[int]:
        """SIGTERM (then SIGKILL) and wait: returns the exit code, None if it was not running."""
        if self._stack is None:
            return None
        server, stack = self.server, self._stack
        self.server, self._stack = None, None
        stack.close()
        return server.proc.returncode

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.workdir.glob("run-*/serve-*.log")))

    # -- aiadmit's own kinds ---------------------------------------------------------------------------------
    def install_kinds(self, timeout: float = 120) -> None:
        """The base's CRDs (Policy, PolicyException) and ClusterRoles/Bindings, as `kubectl apply -k` installs them;
        returns once both kinds are served (the server watches them from its start)."""
        shipped = [o for o in self.rendered.objects
                   if o["kind"] in ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding")]
        self.apiserver.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=aiadmit-e2e",
                               "-f", "-", input=yaml.safe_dump_all(shipped))

        def served() -> bool:
            status, body = self.apiserver.get("/apis/aiadmit.dev/v1alpha1")
            return status == 200 and {"policies", "policyexceptions"} <= {
                r["name"] for r in yaml.safe_load(body).get("resources", [])}

        wait_until(served, timeout, "aiadmit.dev/v1alpha1 to be served")

    # -- the registration -------------------------------------------------------------------------------------
    def configurations(self) -> list[dict]:
        return self.rendered.webhook_configurations(self.url, (self.certs_dir / "ca.crt").read_bytes())

    def register(self) -> None:
        for cfg in self.configurations():
            self.apiserver.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=aiadmit-e2e",
                                   "-f", "-", input=yaml.safe_dump(cfg))

    def unregister(self) -> None:
        for cfg in self.configurations():
            self.apiserver.kubectl("delete", cfg["kind"], cfg["metadata"]["name"], "--ignore-not-found")

    # -- certificates -----------------------------------------------------------------------------------------
    def rotate_certificate(self) -> bytes:
        """`aiadmit certs rotate` over the files the server reads; returns the new certificate's DER."""
        aiadmit_cli("certs", "rotate", "--out", str(self.certs_dir), *[a for h in HOSTS for a in ("--host", h)])
        pem = (self.certs_dir / "tls.crt").read_text()
        return ssl.PEM_cert_to_DER_cert(pem)

    def served_certificate(self) -> bytes:
        return served_certificate(self.port, str(self.certs_dir / "ca.crt"))

    def _serve_option(self, flag: str, default):
        """The rendered value of `aiadmit serve`'s `flag`, else its default (converted to the default's type)."""
        for i, arg in enumerate(self.args):
            if arg.startswith(f"{flag}="):
                return type(default)(arg.split("=", 1)[1])
            if arg == flag:
                return type(default)(self.args[i + 1])
        return default

    def keepalive_requests(self) -> int:
        """How many requests the server answers on one connection before it says `Connection: close`: the
        rendered `--keepalive-requests`, else `aiadmit serve`'s default."""
        from webhook.app.serving import ServeOptions

        return self._serve_option("--keepalive-requests", ServeOptions.keepalive_requests)

    def keepalive_timeout(self) -> float:
        """Seconds the server keeps a connection idle between two requests before it closes it: the rendered
        `--keepalive-timeout`, else `aiadmit serve`'s default."""
        from webhook.app.serving import ServeOptions

        return self._serve_option("--keepalive-timeout", float(ServeOptions.keepalive_timeout))


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.3) -> Any:
    """Poll `predicate` until it returns something truthy (returned); AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
