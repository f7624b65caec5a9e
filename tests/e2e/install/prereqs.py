"""What the single-node cluster needs from this machine, each checked by trying it, with the exact error.

`missing()` returns one line per prerequisite that is absent or does not work here (empty: all present). The
cluster test skips with these lines as its reason, so a skip always says what was tried and what failed; none
of these checks builds anything (the Go builds are tests/e2e/ci-prepare.sh's job, see docs/operations.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

E2E = Path(__file__).resolve().parent.parent
REPO = E2E.parent.parent
CACHE = Path(os.environ.get("AIADMIT_E2E_CACHE") or Path.home() / ".cache" / "aiadmit-e2e")
COMMANDS = ("ip", "unshare", "nsenter", "containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "gcc")
CNI_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
DEBIAN = "containerd runc containernetworking-plugins iptables mmdebstrap"


def control_plane_bin() -> Path | None:
    """The cached kube-apiserver/etcd/kubectl of tests/e2e/cluster/build.sh (same key as that script), or None."""
    d = E2E / "cluster"
    inputs = ("go.mod", "go.sum", "tools.go", "cmd/etcd/main.go", "build.sh")
    key = hashlib.sha256(b"".join((d / f).read_bytes() for f in inputs)).hexdigest()[:16]
    out = CACHE / key
    ok = (out / ".complete").exists() and all(os.access(out / "bin" / b, os.X_OK)
                                                for b in ("kube-apiserver", "etcd", "kubectl"))
    return out / "bin" if ok else None


def node_bin() -> Path | None:
    """The cached kubelet/kube-proxy/controller-manager/scheduler of tests/e2e/node/build.sh, or None."""
    p = subprocess.run(["bash", str(E2E / "node" / "build.sh"), "--check"], capture_output=True, text=True,
                       timeout=60)
    return Path(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else None


def _try(argv, **kw) -> str:
    """'' when argv succeeds, else its exit status and last lines of output."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30, **kw)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{' '.join(argv)}: {exc}"
    if p.returncode == 0:
        return ""
    out = (p.stderr or p.stdout).strip().splitlines()[-3:]
    return f"`{' '.join(argv)}` exited {p.returncode}: {' | '.join(out)}"


def _cgroups() -> str:
    """Can we make a cgroup where the kubelet will make its own? (v1: every hierarchy; v2: the unified one)."""
    root = Path("/sys/fs/cgroup")
    hierarchies = [root] if (root / "cgroup.controllers").exists() else \
        [p for p in root.iterdir() if p.is_dir() and p.name != "unified" and not p.is_symlink()]
    for h in hierarchies:
        probe = h / f"aiadmit-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError as exc:
            return f"mkdir {probe}: {exc}"
    return ""


def _overlay() -> str:
    with tempfile.TemporaryDirectory(prefix="aiadmit-overlay-") as d:
        for sub in ("l", "u", "w", "m"):
            os.mkdir(os.path.join(d, sub))
        err = _try(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={d}/l,upperdir={d}/u,workdir={d}/w", f"{d}/m"])
        if not err:
            subprocess.run(["umount", f"{d}/m"], capture_output=True, timeout=10)
        return err and f"overlayfs (containerd's snapshotter): {err}"


def _namespaces() -> str:
    name = f"aiadmit-probe-{os.getpid()}"
    err = _try(["ip", "netns", "add", name])
    if err:
        return f"network namespace: {err}"
    try:
        for argv in (["ip", "-n", name, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1"],
                     ["ip", "-n", name, "link", "add", "probebr", "type", "bridge"],
                     ["ip", "netns", "exec", name, "iptables", "-t", "nat", "-L", "-n"]):
            err = _try(argv)
            if err:
                return f"veth/bridge/iptables in a namespace (CNI bridge, kube-proxy): {err}"
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
    err = _try(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "true"])
    return err and f"mount + pid namespaces (the node's process tree): {err}"


def missing() -> list[str]:
    if os.geteuid() != 0:
        return ["not root: the node needs root (network namespace, mounts, cgroups, runc)"]
    problems = []
    absent = [c for c in COMMANDS if not shutil.which(c, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
    if absent:
        problems.append(f"commands not found: {' '.join(absent)} (Debian: apt-get install {DEBIAN} gcc)")
    plugins = [p for p in CNI_PLUGINS if not os.access(CNI_DIR / p, os.X_OK)]
    if plugins:
        problems.append(f"CNI plugins not in {CNI_DIR}: {' '.join(plugins)} "
                        "(apt-get install containernetworking-plugins)")
    if control_plane_bin() is None:
        problems.append("kube-apiserver/etcd/kubectl not cached: run tests/e2e/cluster/build.sh")
    if node_bin() is None:
        problems.append("kubelet/kube-proxy/kube-controller-manager/kube-scheduler not cached: run "
                        "tests/e2e/node/build.sh (a cold build takes tens of minutes)")
    if problems:
        return problems
    for check in (_cgroups, _overlay, _namespaces):
        err = check()
        if err:
            problems.append(err)
    return problems
