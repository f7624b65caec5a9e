"""End-to-end test control plane: a real etcd + kube-apiserver (+ kubectl).

Binaries are built from the pinned Go module in ``tests/e2e/cluster`` by
``cluster/build.sh`` (cached under ``$AIADMIT_E2E_CACHE``, default
``~/.cache/aiadmit-e2e``). See ``tests/e2e/README.md``.

Fixtures
--------
``apiserver`` (session)  -> :class:`ControlPlane` (running etcd + kube-apiserver)
``crds`` (session)       -> list of CRD names, installed server-side and
                            Established (and in discovery): the upstream files
                            in $AIADMIT_E2E_CRDS or /work/shared/crds when there,
                            else the repository's copy (tests/data/crds.json.gz)
``namespace`` (function) -> name of a fresh, uniquely named Namespace

Environment
-----------
``AIADMIT_E2E_BIN_DIR``  use prebuilt binaries from this directory (must hold
                         kube-apiserver, etcd, kubectl) instead of build.sh
``AIADMIT_E2E_CACHE``    build cache root (see build.sh)
``AIADMIT_E2E_CRDS``     CRD directory (default /work/shared/crds, else tests/data)
``AIADMIT_E2E_KEEP_LOGS_TAIL`` lines of each log shown on failure (default 80)
"""

from __future__ import annotations

import atexit
import ctypes
import datetime as _dt
import http.client
import ipaddress
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
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import pytest

HERE = Path(__file__).resolve().parent
BUILD_SH = HERE / "cluster" / "build.sh"
DEFAULT_CRD_DIR = Path(os.environ.get("AIADMIT_E2E_CRDS", "/work/shared/crds"))
sys.path.insert(0, str(HERE.parent))  # tests/: testdata (the repository's copy of the CRDs)
import testdata  # noqa: E402
LOG_TAIL = int(os.environ.get("AIADMIT_E2E_KEEP_LOGS_TAIL", "80"))
BINARIES = ("kube-apiserver", "etcd", "kubectl")

# Admission plugins we switch off, and why (see README.md):
#   ServiceAccount: needs the "default" ServiceAccount of the namespace, which
#   is created by kube-controller-manager's serviceaccount controller (not run
#   here); with it on, every Pod create fails with
#   'serviceaccount "default" not found'.
DISABLED_ADMISSION_PLUGINS = ("ServiceAccount",)

# The control plane of the current session (used by the failure-report hook).
_CURRENT: "ControlPlane | None" = None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: end-to-end test against a real kube-apiserver + etcd built from "
        "tests/e2e/cluster (needs Go on a cold cache; deselect with -m 'not e2e')",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Everything under tests/e2e is an e2e test, whether or not it says so.
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _CURRENT is not None and "apiserver" in getattr(item, "fixturenames", ()):
        for name, text in _CURRENT.log_tails().items():
            report.sections.append((f"{name} log (last {LOG_TAIL} lines)", text))


# --------------------------------------------------------------------------- helpers


class E2ESetupError(RuntimeError):
    pass


class E2ENoToolchain(E2ESetupError):
    """The binaries are not cached and there is no Go to build them: the e2e tests skip, saying so."""


class KubectlError(subprocess.CalledProcessError):
    def __str__(self) -> str:  # include the output, unlike CalledProcessError
        return (
            f"kubectl {' '.join(map(str, self.cmd[3:]))} exited {self.returncode}\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = LOG_TAIL) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return "\n".join(lines[-n:])


def _set_pdeathsig() -> None:
    """Child side of Popen: die with SIGKILL if the pytest process dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _find_go() -> str | None:
    go = os.environ.get("AIADMIT_E2E_GO") or shutil.which("go")
    if not go and os.access("/usr/local/go/bin/go", os.X_OK):
        go = "/usr/local/go/bin/go"
    return go


def _follow_build(proc: subprocess.Popen, log, announce, timeout: float) -> str:
    """Wait for build.sh, bounded by `timeout`: its progress lines go to the log and to the terminal as they
    come, and a line every minute says the (silent) Go build is still going. Returns its stdout."""
    start = time.monotonic()
    out: list[str] = []

    def pump(stream, sink) -> None:
        for line in stream:
            sink(line)

    threads = [threading.Thread(target=pump, args=(proc.stdout, out.append), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, lambda l: (log.write(l), log.flush(),
                                                                          announce(l.rstrip()))), daemon=True)]
    for thread in threads:
        thread.start()
    while True:
        try:
            proc.wait(timeout=60)
            break
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - start
            if elapsed > timeout:
                proc.kill()
                proc.wait()
                raise E2ESetupError(f"tests/e2e/cluster/build.sh still running after {elapsed:.0f}s (limit "
                                    f"AIADMIT_E2E_BUILD_TIMEOUT={timeout:.0f}s); build log {log.name}")
            announce(f"aiadmit e2e: still building ({elapsed / 60:.0f} min so far; log {log.name})")
    for thread in threads:
        thread.join(timeout=10)
    return "".join(out)


def ensure_binaries(log_path: Path, announce=lambda msg: None) -> Path:
    """Return the directory holding kube-apiserver, etcd and kubectl."""
    override = os.environ.get("AIADMIT_E2E_BIN_DIR")
    if override:
        bin_dir = Path(override)
        missing = [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]
        if missing:
            raise E2ESetupError(f"AIADMIT_E2E_BIN_DIR={bin_dir} lacks {missing}")
        return bin_dir
    announce(
        "aiadmit e2e: the end-to-end tests run a real etcd + kube-apiserver (+ kubectl), built from the pinned Go "
        f"module by {BUILD_SH.relative_to(HERE.parent.parent)} and cached in ~/.cache/aiadmit-e2e. On a cold cache "
        "that is a Go build of Kubernetes: ~16 min on 2 busy cores here (v1.37.2; 14 min of CPU), longer on a slow "
        "runner (progress below; tests/e2e/ci-prepare.sh warms the cache; -m 'not e2e' leaves these tests out)"
    )
    env = dict(os.environ)
    go = _find_go()
    if go:
        env["AIADMIT_E2E_GO"] = go
    timeout = float(os.environ.get("AIADMIT_E2E_BUILD_TIMEOUT", "3600"))
    with open(log_path, "w") as log:
        proc = subprocess.Popen(["bash", str(BUILD_SH)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        stdout = _follow_build(proc, log, announce, timeout)
    if proc.returncode == 127 or (proc.returncode != 0 and not go):
        raise E2ENoToolchain(
            "e2e tests need kube-apiserver, etcd and kubectl: they are not cached and the Go toolchain (>= 1.24) "
            "to build them was not found (install Go on PATH or at /usr/local/go/bin, or set AIADMIT_E2E_GO / "
            "AIADMIT_E2E_BIN_DIR); deselect them with -m 'not e2e'")
    if proc.returncode != 0:
        raise E2ESetupError(
            f"tests/e2e/cluster/build.sh failed (exit {proc.returncode}).\n"
            f"--- build log {log_path} (tail)\n{_tail(log_path)}"
        )
    lines = [l for l in stdout.splitlines() if l.strip()]
    if not lines:
        raise E2ESetupError(f"build.sh printed no bin dir; log:\n{_tail(log_path)}")
    return Path(lines[-1].strip())


# --------------------------------------------------------------------------- PKI


@dataclass
class PKI:
    """CA + certificates for one control plane, all PEM files in ``dir``."""

    dir: Path
    ca_cert: Path = field(init=False)
    ca_key: Path = field(init=False)

    def __post_init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.dir.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aiadmit-e2e-ca")])
        now = _dt.datetime.now(_dt.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _dt.timedelta(hours=1))
            .not_valid_after(now + _dt.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False, key_agreement=False,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        self._ca_key_obj, self._ca_cert_obj = key, cert
        self.ca_cert = self.dir / "ca.crt"
        self.ca_key = self.dir / "ca.key"
        self._write(self.ca_cert, self.ca_key, cert, key)

    @property
    def ca_pem(self) -> bytes:
        return self.ca_cert.read_bytes()

    @staticmethod
    def _write(cert_path: Path, key_path: Path, cert, key) -> None:
        from cryptography.hazmat.primitives import serialization

        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        os.chmod(key_path, 0o600)

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        organizations: Sequence[str] = (),
        hosts: Iterable[str] = (),
        server: bool = False,
        client: bool = False,
    ) -> tuple[Path, Path]:
        """Issue a leaf cert signed by the CA; returns (cert_path, key_path)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        now = _dt.datetime.now(_dt.timezone.utc)
        eku = []
        if server:
            eku.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            eku.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._ca_cert_obj.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _dt.timedelta(hours=1))
            .not_valid_after(now + _dt.timedelta(days=7))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_encipherment=False, key_cert_sign=False, crl_sign=False,
                    content_commitment=False, data_encipherment=False, key_agreement=False,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._ca_key_obj.public_key()),
                critical=False,
            )
        )
        if eku:
            b = b.add_extension(x509.ExtendedKeyUsage(eku), critical=False)
        sans: list[x509.GeneralName] = []
        for h in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                sans.append(x509.DNSName(h))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = b.sign(self._ca_key_obj, hashes.SHA256())
        cert_path, key_path = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        self._write(cert_path, key_path, cert, key)
        return cert_path, key_path

    def service_account_keypair(self) -> tuple[Path, Path]:
        """RSA key pair for signing/verifying service-account tokens: (pub, key)."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pub, priv = self.dir / "sa.pub", self.dir / "sa.key"
        pub.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        priv.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        os.chmod(priv, 0o600)
        return pub, priv


# --------------------------------------------------------------------------- processes


class ManagedProcess:
    """A child in its own process group, logging to a file; stop() leaves nothing behind."""

    def __init__(self, name: str, argv: list[str], log_path: Path, cwd: Path):
        self.name, self.argv, self.log_path = name, argv, log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,  # own process group -> killpg
            preexec_fn=_set_pdeathsig if sys.platform.startswith("linux") else None,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        pgid = self.proc.pid  # session leader: pgid == pid
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                # Leader gone; make sure no straggler is left in the group.
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                break
            except subprocess.TimeoutExpired:
                continue
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()


# --------------------------------------------------------------------------- control plane


class ControlPlane:
    """A running etcd + kube-apiserver, with admin credentials.

    Attributes: ``url``, ``kubeconfig`` (Path), ``api_client``
    (kubernetes.client.ApiClient), ``bin_dir``, ``workdir``, ``pki`` (:class:`PKI`,
    with ``ca_cert``/``ca_key``/``ca_pem`` to sign webhook serving certs),
    ``etcd_url``, ``host``/``port``, ``logs`` (name -> Path).
    """

    def __init__(self, bin_dir: Path, workdir: Path):
        self.bin_dir = bin_dir
        self.workdir = workdir
        self.kubectl_bin = bin_dir / "kubectl"
        self.procs: list[ManagedProcess] = []
        self.logs: dict[str, Path] = {}
        self.host = "127.0.0.1"
        self.port = 0
        self.url = ""
        self.etcd_url = ""
        self.kubeconfig = workdir / "kubeconfig"
        self.pki = PKI(workdir / "pki")
        self.extra_args: list[str] = []  # more kube-apiserver flags (e.g. --admission-control-config-file)
        self._api_client = None
        self._ssl: ssl.SSLContext | None = None

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        atexit.register(self.stop)
        self._start_etcd()
        for attempt in range(3):  # free-port races are possible but rare
            try:
                self._start_apiserver()
                break
            except E2ESetupError:
                if attempt == 2 or "address already in use" not in _tail(self.logs["kube-apiserver"], 400):
                    raise
                self.procs.pop().stop()
        self._write_kubeconfig()
        self._wait_default_namespace()

    def stop(self) -> None:
        if self._api_client is not None:
            try:
                self._api_client.close()
            except Exception:
                pass
            self._api_client = None
        while self.procs:  # apiserver first, then etcd
            self.procs.pop().stop()

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        log = self.workdir / f"{name}.log"
        self.logs[name] = log
        p = ManagedProcess(name, argv, log, self.workdir)
        self.procs.append(p)
        return p

    def _fail(self, msg: str) -> E2ESetupError:
        tails = "\n".join(f"--- {n} log {p} (tail)\n{_tail(p)}" for n, p in self.logs.items())
        return E2ESetupError(f"{msg}\n{tails}")

    def _start_etcd(self) -> None:
        for attempt in range(3):
            client, peer = _free_port(), _free_port()
            self.etcd_url = f"http://127.0.0.1:{client}"
            data = self.workdir / "etcd-data"
            shutil.rmtree(data, ignore_errors=True)
            p = self._spawn(
                "etcd",
                [
                    str(self.bin_dir / "etcd"),
                    "--name=e2e",
                    f"--data-dir={data}",
                    f"--listen-client-urls={self.etcd_url}",
                    f"--advertise-client-urls={self.etcd_url}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
                    "--initial-cluster-state=new",
                    "--unsafe-no-fsync",  # throwaway data; much faster on shared CI disks
                    "--log-level=warn",
                ],
            )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if not p.alive():
                    break
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", client, timeout=2)
                    conn.request("GET", "/health")
                    body = conn.getresponse().read()
                    conn.close()
                    if json.loads(body).get("health") == "true":
                        return
                except (OSError, ValueError, http.client.HTTPException):
                    pass
                time.sleep(0.2)
            if attempt < 2 and "address already in use" in _tail(self.logs["etcd"], 400):
                self.procs.pop().stop()
                continue
            raise self._fail("etcd did not become healthy within 60s")

    def _start_apiserver(self) -> None:
        pki = self.pki
        self.port = _free_port()
        self.url = f"https://{self.host}:{self.port}"
        serving_crt, serving_key = pki.issue(
            "apiserver",
            common_name="kube-apiserver",
            hosts=["127.0.0.1", "localhost", "10.0.0.1", "kubernetes", "kubernetes.default",
                   "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"],
            server=True,
        )
        self.admin_cert, self.admin_key = pki.issue(
            "admin", common_name="aiadmit-e2e-admin", organizations=["system:masters"], client=True
        )
        sa_pub, sa_key = pki.service_account_keypair()
        argv = [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # Since 1.37 the endpoint reconciler (which publishes the advertise address as the `kubernetes`
            # Service's endpoint) refuses a loopback address, and the server exits at start. Nothing here routes
            # to that Service, so no reconciler runs.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.port}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={serving_crt}",
            f"--tls-private-key-file={serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_pub}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            f"--disable-admission-plugins={','.join(DISABLED_ADMISSION_PLUGINS)}",
            # Real clusters (kubeadm, kind, GKE, ...) allow privileged containers;
            # the kube-apiserver default (false) would reject them before any webhook.
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
            *self.extra_args,
        ]
        self._spawn("kube-apiserver", argv)
        self._ssl = ssl.create_default_context(cafile=str(pki.ca_cert))
        self._ssl.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        self._wait_ready(timeout=180)

    def _wait_ready(self, timeout: float) -> None:
        proc = self.procs[-1]
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if not proc.alive():
                raise self._fail(f"kube-apiserver exited with {proc.proc.returncode} before /readyz")
            try:
                status, body = self.get("/readyz")
                if status == 200:
                    return
                last = f"{status} {body[:300]!r}"
            except (OSError, http.client.HTTPException) as e:
                last = repr(e)
            time.sleep(0.5)
        raise self._fail(f"kube-apiserver /readyz not ok within {timeout}s (last: {last})")

    def _wait_default_namespace(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.get("/api/v1/namespaces/default")[0] == 200:
                return
            time.sleep(0.3)
        raise self._fail("namespace 'default' was not created by the apiserver")

    def _write_kubeconfig(self) -> None:
        import yaml

        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": {"server": self.url,
                                                       "certificate-authority": str(self.pki.ca_cert)}}],
            "users": [{"name": "e2e-admin", "user": {"client-certificate": str(self.admin_cert),
                                                      "client-key": str(self.admin_key)}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e-admin"}}],
            "current-context": "e2e",
            "preferences": {},
        }
        self.kubeconfig.write_text(yaml.safe_dump(cfg))
        os.chmod(self.kubeconfig, 0o600)

    # -- clients -----------------------------------------------------------
    def get(self, path: str, timeout: float = 10) -> tuple[int, bytes]:
        """Raw authenticated GET (admin client cert); returns (status, body)."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self._ssl, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def get_json(self, path: str) -> Any:
        status, body = self.get(path)
        if status != 200:
            raise AssertionError(f"GET {path}: {status} {body[:500]!r}")
        return json.loads(body)

    @property
    def api_client(self):
        """kubernetes.client.ApiClient authenticated as the admin (system:masters)."""
        if self._api_client is None:
            from kubernetes import config as kconfig

            self._api_client = kconfig.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api_client

    def new_api_client(self):
        """A fresh ApiClient (caller closes it)."""
        from kubernetes import config as kconfig

        return kconfig.new_client_from_config(config_file=str(self.kubeconfig))

    def kubectl(
        self,
        *args: str,
        input: str | bytes | None = None,
        check: bool = True,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess:
        """Run kubectl against this control plane; text stdout/stderr.

        Raises :class:`KubectlError` (a CalledProcessError that shows stderr) on
        a non-zero exit when ``check`` is true.
        """
        cmd = [str(self.kubectl_bin), f"--kubeconfig={self.kubeconfig}",
               f"--cache-dir={self.workdir / 'kubectl-cache'}", *map(str, args)]
        if isinstance(input, bytes):
            input = input.decode()
        p = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise KubectlError(p.returncode, cmd, p.stdout, p.stderr)
        return p

    def kubectl_json(self, *args: str, **kw) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", **kw).stdout)

    def issue_serving_cert(self, name: str, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> tuple[Path, Path]:
        """Serving cert for e.g. a webhook, signed by the CA the apiserver trusts.

        Returns (cert_path, key_path); use ``pki.ca_pem`` as the webhook caBundle.
        """
        return self.pki.issue(name, common_name=hosts[0], hosts=hosts, server=True)

    def log_tails(self, n: int = LOG_TAIL) -> dict[str, str]:
        return {name: _tail(path, n) for name, path in self.logs.items()}


# --------------------------------------------------------------------------- fixtures


def _announce(config: pytest.Config):
    """Write a line to the terminal now, even while pytest captures output."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")

    def say(msg: str) -> None:
        if tr is None:
            print(msg, file=sys.__stderr__)
            return
        if capman is not None:
            with capman.global_and_fixture_disabled():
                tr.write_line(msg)
        else:
            tr.write_line(msg)

    return say


@pytest.fixture(scope="session")
def apiserver(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A real etcd + kube-apiserver for the whole session (see ControlPlane)."""
    global _CURRENT
    workdir = tmp_path_factory.mktemp("control-plane")
    error = None
    try:
        bin_dir = ensure_binaries(workdir / "build.log", _announce(request.config))
    except E2ENoToolchain as e:
        pytest.skip(str(e))
    except E2ESetupError as e:
        error = str(e)
    if error:  # outside the except: keep the failure message free of chained tracebacks
        pytest.fail(error, pytrace=False)
    cp = ControlPlane(bin_dir, workdir)
    try:
        cp.start()
    except E2ESetupError as e:
        error = f"e2e control plane failed to start (logs in {workdir}):\n{e}"
    except BaseException:
        cp.stop()
        raise
    if error:
        cp.stop()
        pytest.fail(error, pytrace=False)
    _CURRENT = cp
    try:
        yield cp
    finally:
        _CURRENT = None
        cp.stop()


def crd_files(root: Path = DEFAULT_CRD_DIR) -> list[Path]:
    return testdata.crd_files(root)


@pytest.fixture(scope="session")
def crds(apiserver: ControlPlane) -> list[str]:
    """Install every CRD of crd_files() server-side; wait until usable.

    Returns the CRD names (``<plural>.<group>``). Server-side apply (or create) is
    required: many of these CRDs exceed the 256 KiB last-applied annotation limit.
    """
    import yaml

    files = crd_files()
    if not files:
        pytest.fail(f"no CRDs found under {DEFAULT_CRD_DIR} or in {testdata.CRDS_FILE}", pytrace=False)
    args = ["apply", "--server-side", "--force-conflicts", "--field-manager=aiadmit-e2e"]
    for f in files:
        args += ["-f", str(f)]
    apiserver.kubectl(*args, timeout=600)  # slow under CPU contention

    served: dict[str, tuple[str, list[str]]] = {}
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                spec = doc["spec"]
                served[doc["metadata"]["name"]] = (
                    spec["group"],
                    [v["name"] for v in spec["versions"] if v.get("served")],
                )
    # Poll ourselves rather than `kubectl wait`: kubectl wait errors out
    # (".status.conditions accessor error") on a CRD the apiserver has not
    # given any condition yet, instead of waiting.
    deadline = time.monotonic() + 300
    pending = dict(served)
    while pending and time.monotonic() < deadline:
        items = apiserver.get_json("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
        for crd in items:
            conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
            if conds.get("Established") == "True":
                pending.pop(crd["metadata"]["name"], None)
        if pending:
            time.sleep(0.5)
    if pending:
        pytest.fail(f"CRDs not Established after 300s: {sorted(pending)}", pytrace=False)
    # Established != visible in discovery yet; kubectl needs discovery.
    deadline = time.monotonic() + 300
    pending = dict(served)
    while pending and time.monotonic() < deadline:
        for name, (group, versions) in list(pending.items()):
            plural = name.split(".", 1)[0]
            ok = True
            for v in versions:
                status, body = apiserver.get(f"/apis/{group}/{v}")
                if status != 200 or plural not in {r["name"] for r in json.loads(body).get("resources", [])}:
                    ok = False
                    break
            if ok:
                del pending[name]
        if pending:
            time.sleep(0.5)
    if pending:
        pytest.fail(f"CRDs not in discovery after 300s: {sorted(pending)}", pytrace=False)
    return sorted(served)


@pytest.fixture
def namespace(apiserver: ControlPlane, request: pytest.FixtureRequest) -> str:
    """A fresh Namespace. Not deleted: there is no namespace controller, so a
    deleted namespace would stay Terminating forever anyway."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    apiserver.kubectl("create", "namespace", name)
    return name


@pytest.fixture(scope="session")
def aiadmit_server(apiserver: ControlPlane, crds: list[str], tmp_path_factory: pytest.TempPathFactory):
    """`aiadmit serve` with the arguments of manifests/base's Deployment, live facts from this API server
    (tests/e2e/webhooks.py). Started once, NOT registered: a module registers it (webhooks.Webhook.register)
    and unregisters it when done, so that the other modules' deliberately non-compliant objects are not
    sent to it. Stopped (no process left) at the end of the session."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    from webhooks import Webhook

    hook = Webhook(apiserver, tmp_path_factory.mktemp("aiadmit-webhook"))
    hook.install_kinds()  # manifests/base's CRDs and ClusterRoles, as an install has them before the Deployment
    hook.start()
    try:
        yield hook
    finally:
        hook.unregister()
        hook.stop()
