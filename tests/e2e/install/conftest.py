"""Fixtures of the install tests: the image, a single-node cluster, and aiadmit installed into it.

Marker `cluster` (and `e2e`, as everything under tests/e2e): `-m "not cluster"` or `-m "not e2e"` deselects them.
Prerequisites are checked first (prereqs.py); a missing one skips with what was tried and the exact error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import images
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


@pytest.fixture(scope="module")
def installed(node, tmp_path_factory):
    """The dev overlay, exactly as committed (its image `aiadmit:dev` is the name build.sh gives the image it
    imported), applied server-side after `aiadmit certs generate`, as docs/operations.md says; waits for both
    replicas to be Ready. Returns the time that took."""
    copy = Path(tmp_path_factory.mktemp("manifests")) / "manifests"
    shutil.copytree(REPO / "manifests", copy, ignore=shutil.ignore_patterns("certs", "image"))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-m", "webhook", "certs", "generate", "--out",
                    str(copy / "overlays" / "dev" / "certs"), "--service", "aiadmit", "--namespace", NAMESPACE],
                   check=True, capture_output=True, text=True, timeout=60, env=env)
    started = time.monotonic()
    node.kubectl("apply", "--server-side", "-k", str(copy / "overlays" / "dev"))
    try:
        wait_for("2 ready aiadmit replicas", lambda: ready_replicas(node) == 2, 300, 1, node.dead)
    except (TimeoutError, RuntimeError) as exc:
        pods = node.kubectl("-n", NAMESPACE, "describe", "pods", check=False).stdout[-4000:]
        events = node.kubectl("get", "events", "-A", check=False).stdout[-3000:]
        pytest.fail(f"{exc}\n--- pods\n{pods}\n--- events\n{events}\n--- kubelet\n{node.tail('kubelet', 30)}",
                    pytrace=False)
    return time.monotonic() - started


