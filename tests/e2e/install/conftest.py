"""Fixtures of the install tests: the image, a single-node cluster, and aiadmit installed into it.

Marker `cluster` (and `e2e`, as everything under tests/e2e): `-m "not cluster"` or `-m "not e2e"` deselects them.
Prerequisites are checked first (prereqs.py); a missing one skips with what was tried and the exact error.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from kubernetes import config as kconfig

import images
import installs
import prereqs
from nodeharness import NAMESPACE, Node, ready_replicas, wait_for

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cluster: runs aiadmit's image in a real single-node cluster (kubelet, containerd, runc) or under runc; "
        "needs root and the cached binaries of tests/e2e/ci-prepare.sh; deselect with -m 'not cluster'",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def image():
    """(directory, report) of the image built by manifests/image/build.sh (cached between runs)."""
    if os.geteuid() != 0:
        pytest.skip("manifests/image/build.sh needs root (chroot into the image's root filesystem)")
    path = os.environ.get("PATH", "") + ":/usr/sbin"
    missing = [t for t in ("mmdebstrap", "tar", "chroot") if not shutil.which(t, path=path)]
    if missing:
        pytest.skip(f"image build tools not found: {' '.join(missing)} (apt-get install mmdebstrap)")
    return images.aiadmit_image()


@pytest.fixture(scope="module")
def node(image, tmp_path_factory):
    problems = prereqs.missing()
    if problems:
        pytest.skip("single-node cluster cannot run here: " + "; ".join(problems))
    workdir = Path(tmp_path_factory.mktemp("node"))
    n = Node(workdir, prereqs.control_plane_bin(), prereqs.node_bin())
    started = time.monotonic()
    try:
        n.start([images.pause_image(), image[0] / "aiadmit-image.tar"])
    except BaseException as exc:
        logs = "\n".join(f"--- {c}\n{n.tail(c, 25)}" for c in n.procs)
        n.stop()
        pytest.fail(f"the node did not start: {exc}\n{logs}", pytrace=False)
    n.started_in = time.monotonic() - started
    yield n
    n.stop()


INSTALLS = ("kustomize", "helm")


@pytest.fixture(scope="module", params=INSTALLS)
def installed(request, node, tmp_path_factory):
    """aiadmit installed by each documented install in turn (installs.py): the dev overlay as committed, then the
    Helm chart with only the image reference and the certificate source set; both replicas Ready. The tests that
    use it run once per install, in this order, with the previous install uninstalled (webhook configurations and
    namespace gone) before the next one starts. Yields the Install, with `.seconds` from install to 2 Ready."""
    workdir = Path(tmp_path_factory.mktemp(request.param))
    if request.param == "helm":
        helm, why = installs.helm_binary()
        if helm is None:
            pytest.skip(why)
        install = installs.Helm(node, workdir, helm)
    else:
        install = installs.Kustomize(node, workdir)
    started = time.monotonic()
    install.install()
    try:
        wait_for("2 ready aiadmit replicas", lambda: ready_replicas(node) == 2, 300, 1, node.dead)
    except (TimeoutError, RuntimeError) as exc:
        pods = node.kubectl("-n", NAMESPACE, "describe", "pods", check=False).stdout[-4000:]
        events = node.kubectl("get", "events", "-A", check=False).stdout[-3000:]
        install.uninstall()
        pytest.fail(f"{request.param}: {exc}\n--- pods\n{pods}\n--- events\n{events}\n--- kubelet\n"
                    f"{node.tail('kubelet', 30)}", pytrace=False)
    install.seconds = time.monotonic() - started
    yield install
    last = request.param == INSTALLS[-1]
    took = install.uninstall(namespace_too=not last)
    print(f"{request.param} uninstalled in {took:.1f} s")


@pytest.fixture(scope="module")
def api(node, installed):
    """A Kubernetes client of the cluster's admin, once aiadmit is installed."""
    c = kconfig.new_client_from_config(config_file=str(node.kubeconfig))
    yield c
    c.close()
