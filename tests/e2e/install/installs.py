"""The two documented installs of aiadmit into the single-node cluster, and their uninstalls.

Both follow docs/operations.md ("Install", "Uninstall") with one certificate source that needs no cert-manager:
- `kustomize`: `aiadmit certs generate` into the dev overlay, `kubectl apply --server-side -k manifests/overlays/dev`
  (the overlay exactly as committed: its image `aiadmit:dev` is the name build.sh gives the image);
- `helm`: the namespace with its Pod Security labels, the TLS Secret from `aiadmit certs generate`, then
  `helm install aiadmit charts/aiadmit` against the cluster's API server with the image reference and
  `certificates.source=secret` + `certificates.caBundle` set (the chart's default source is cert-manager, which
  this cluster does not run) and nothing else.

Each uninstall ends only when the webhook configurations and the namespace are gone: the configurations are
cluster-scoped, and one left pointing at a deleted Service would fail-close every create of the next install's
checks.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from nodeharness import NAMESPACE, Node, wait_for

REPO = Path(__file__).resolve().parent.parent.parent.parent
BUILD_HELM = REPO / "tests" / "e2e" / "cluster" / "build-helm.sh"
CHART = REPO / "charts" / "aiadmit"
RELEASE = "aiadmit"
WEBHOOKS = ("validatingwebhookconfiguration", "mutatingwebhookconfiguration")


def _certs(out: Path) -> Path:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-m", "webhook", "certs", "generate", "--out", str(out), "--service", "aiadmit",
                    "--namespace", NAMESPACE], check=True, capture_output=True, text=True, timeout=60, env=env)
    return out


def helm_binary() -> tuple[str | None, str]:
    """(path to the pinned helm, '') or (None, why not): $AIADMIT_HELM, else tests/e2e/cluster/build-helm.sh
    (a cache hit returns at once; a cold build takes minutes and is ci-prepare.sh's job)."""
    if os.environ.get("AIADMIT_HELM"):
        return os.environ["AIADMIT_HELM"], ""
    p = subprocess.run(["bash", str(BUILD_HELM)], capture_output=True, text=True, timeout=1800)
    if p.returncode == 127:
        return None, "no helm: not cached and no Go toolchain to build it (tests/e2e/cluster/build-helm.sh; " \
                     "or set AIADMIT_HELM)"
    if p.returncode != 0:
        return None, f"tests/e2e/cluster/build-helm.sh exited {p.returncode}: {p.stderr.strip()[-500:]}"
    return p.stdout.strip().splitlines()[-1], ""


class Install:
    """One way of installing; `install()` returns once the objects are created (not yet Ready)."""

    how = ""

    def __init__(self, node: Node, workdir: Path) -> None:
        self.node, self.dir = node, workdir

    def install(self) -> None:
        raise NotImplementedError

    def remove(self) -> None:
        raise NotImplementedError

    def uninstall(self, namespace_too: bool = True, timeout: float = 180) -> float:
        """The documented uninstall, then wait until the webhook configurations are gone (and the namespace, unless
        `namespace_too` is false: the last install's namespace goes with the node). Seconds it took."""
        started = time.monotonic()
        self.remove()

        def gone() -> bool:
            left = [kind for kind in WEBHOOKS
                    if self.node.kubectl("get", kind, "aiadmit", "--ignore-not-found", "-o", "name").stdout.strip()]
            if namespace_too:
                left += self.node.kubectl("get", "namespace", NAMESPACE, "--ignore-not-found", "-o",
                                          "name").stdout.split()
            return not left

        what = "webhook configurations" + (" and namespace" if namespace_too else "")
        wait_for(f"the {self.how} install's {what} to be gone", gone, timeout, 1)
        return time.monotonic() - started


class Kustomize(Install):
    how = "kustomize"

    def install(self) -> None:
        self.copy = self.dir / "manifests"
        shutil.copytree(REPO / "manifests", self.copy, ignore=shutil.ignore_patterns("certs", "image"))
        _certs(self.copy / "overlays" / "dev" / "certs")
        self.node.kubectl("apply", "--server-side", "-k", str(self.copy / "overlays" / "dev"))

    def remove(self) -> None:
        # docs/operations.md, "Uninstall": the webhook configurations first, then the rest (the namespace with it).
        for kind in WEBHOOKS:
            self.node.kubectl("delete", kind, "aiadmit", "--ignore-not-found")
        self.node.kubectl("delete", "--ignore-not-found", "--wait=false", "-k", str(self.copy / "overlays" / "dev"))


class Helm(Install):
    how = "helm"

    def __init__(self, node: Node, workdir: Path, helm: str) -> None:
        super().__init__(node, workdir)
        self.helm = helm

    def run_helm(self, *args: str) -> subprocess.CompletedProcess:
        p = subprocess.run([self.helm, f"--kubeconfig={self.node.kubeconfig}", "--namespace", NAMESPACE, *args],
                           capture_output=True, text=True, timeout=180,
                           env=dict(os.environ, HELM_CACHE_HOME=str(self.dir / "helm-cache"),
                                    HELM_CONFIG_HOME=str(self.dir / "helm-config"),
                                    HELM_DATA_HOME=str(self.dir / "helm-data")))
        if p.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} exited {p.returncode}: {p.stderr[-3000:]}")
        return p

    def install(self) -> None:
        # docs/operations.md, "With Helm", certificates.source=secret: the namespace with the labels of
        # manifests/base/namespace.yaml, the Secret, then the chart with the CA that signed the Secret's pair.
        certs = _certs(self.dir / "certs")
        k = self.node.kubectl
        k("create", "namespace", NAMESPACE)
        k("label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=restricted",
          "pod-security.kubernetes.io/enforce-version=latest")
        k("-n", NAMESPACE, "create", "secret", "tls", "aiadmit-tls", f"--cert={certs / 'tls.crt'}",
          f"--key={certs / 'tls.key'}")
        ca = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
        self.run_helm("install", RELEASE, str(CHART), "--set", "image.repository=aiadmit", "--set", "image.tag=dev",
                      "--set", "certificates.source=secret", "--set", f"certificates.caBundle={ca}")

    def remove(self) -> None:
        # docs/operations.md, "Uninstall": `helm uninstall` deletes the webhook configurations with the rest; the
        # namespace was made before the chart (the chart does not own it), so it goes after.
        self.run_helm("uninstall", RELEASE, "--wait", "--timeout=120s")
        self.node.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")
