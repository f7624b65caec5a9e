"""A real single-node Kubernetes cluster for the install test: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kube-proxy (iptables) and a kubelet with containerd, runc and a CNI bridge.

Isolation, and why each piece:
- one network namespace made by the test (nsforward.py): the node address, the pod bridge and the Service IPs
  exist only there; the test reaches the API server through a forwarder on the host's 127.0.0.1;
- one mount + PID namespace for every node process (a small init is its PID 1): kubelet and containerd see the
  same mounts (secret volumes, overlay snapshots), and killing that init ends every process of the node,
  shims and containers included, and drops every mount with it;
- the kubelet's cgroups under a cgroup of their own (cgroupRoot), inside the memory cgroup the test runs in;
  removed at the end;
- containerd's root, state and socket, the kubelet's root, CNI state, etcd's data: all under one work directory.
Binaries: tests/e2e/cluster/build.sh and tests/e2e/node/build.sh (k8s.io/kubernetes v1.37.2); containerd, runc
and the CNI plugins from Debian. The sandbox ("pause") image is built here from pause.c.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import yaml

import nsforward
from clusterpki import ClusterPKI

HERE = Path(__file__).resolve().parent
NODE_NAME = "aiadmit-node"
NODE_IP = "10.200.0.2"  # inside the test's namespace only, on its loopback device
POD_CIDR = "10.244.0.0/24"
SERVICE_CIDR = "10.96.0.0/24"
KUBERNETES_SVC_IP = "10.96.0.1"
PAUSE_REF = "aiadmit.local/pause:1"
NAMESPACE = "aiadmit-system"  # the manifests' namespace
INIT = ("import os, signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: os._exit(0))\n"
        "while True:\n"
        "    try:\n        os.wait()\n"
        "    except ChildProcessError:\n        time.sleep(0.5)\n")


def _pdeathsig() -> None:
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with pytest


def wait_for(what: str, check, timeout: float, interval: float = 0.5, alive=lambda: ""):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        dead = alive()
        if dead:
            raise RuntimeError(f"while waiting for {what}: {dead}")
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - the last one is reported
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s (last error: {last!r})")


class Node:
    def __init__(self, workdir: Path, control_bin: Path, node_bin: Path) -> None:
        self.dir, self.cbin, self.nbin = workdir, control_bin, node_bin
        self.netns = f"aiadmit-node-{uuid.uuid4().hex[:6]}"
        self.netns_path = ""
        self.holder: subprocess.Popen | None = None
        self.init_pid = 0
        self.procs: dict[str, subprocess.Popen] = {}
        self.forwarder: nsforward.Forwarder | None = None
        self.cgroup_root = ""
        self.kubeconfig = self.dir / "pki" / "admin.kubeconfig"
        self._netns_before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()

    # ------------------------------------------------------------------ processes in the node's namespaces
    def _start_holder(self) -> None:
        self.netns_path = nsforward.create_netns(self.netns)
        subprocess.run(["ip", "-n", self.netns, "addr", "add", f"{NODE_IP}/32", "dev", "lo"], check=True,
                       timeout=10)
        # A node's own connections to Service IPs (the API server calling the webhook's Service) need a route
        # before kube-proxy's OUTPUT rule rewrites them to a pod; real nodes have a default route, this
        # namespace has no way out, so the Service range alone is routed (to loopback, never leaving).
        subprocess.run(["ip", "-n", self.netns, "route", "add", SERVICE_CIDR, "dev", "lo"], check=True, timeout=10)
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--propagation", "private", "--kill-child",
             "--", "nsenter", f"--net={self.netns_path}", "--", "python3", "-c", INIT],
            preexec_fn=_pdeathsig, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def child() -> int:
            text = Path(f"/proc/{self.holder.pid}/task/{self.holder.pid}/children").read_text().split()
            return int(text[0]) if text else 0

        self.init_pid = wait_for("the node's init process", child, 10, 0.05)

    def run(self, name: str, argv: list[str]) -> subprocess.Popen:
        """Start a long-running component inside the node; output to <workdir>/logs/<name>.log."""
        log = open(self.dir / "logs" / f"{name}.log", "ab")
        p = subprocess.Popen(["nsenter", "-t", str(self.init_pid), "-m", "-p", "-n", "--", *argv],
                             stdout=log, stderr=subprocess.STDOUT, preexec_fn=_pdeathsig)
        self.procs[name] = p
        return p

    def exec(self, argv: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        """Run a command inside the node and wait for it."""
        return subprocess.run(["nsenter", "-t", str(self.init_pid), "-m", "-p", "-n", "--", *argv],
                              capture_output=True, text=True, timeout=timeout, **kw)

    def dead(self) -> str:
        for name, p in self.procs.items():
            if p.poll() is not None:
                return f"{name} exited with {p.returncode}:\n{self.tail(name)}"
        return ""

    def tail(self, name: str, lines: int = 40) -> str:
        try:
            return "\n".join((self.dir / "logs" / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"<{exc}>"

    # ------------------------------------------------------------------ start, in dependency order
    def start(self, images: list[Path]) -> None:
        for sub in ("logs", "pki", "etcd", "containerd", "kubelet", "cni/net.d", "cni/ipam", "manifests"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self._start_holder()
        self.pki = ClusterPKI(self.dir / "pki")
        server = f"https://{NODE_IP}:6443"
        self.run("etcd", [str(self.cbin / "etcd"), "--name=node", f"--data-dir={self.dir / 'etcd'}",
                          "--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
                          "--listen-peer-urls=http://127.0.0.1:2380",
                          "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                          "--initial-cluster=node=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=warn"])
        self._apiserver()
        self.forwarder = nsforward.Forwarder(self.netns_path, (NODE_IP, 6443))
        self.kubeconfig = self.pki.kubeconfig("admin", f"https://127.0.0.1:{self.forwarder.port}",
                                              "aiadmit-cluster-admin", ["system:masters"])
        wait_for("kube-apiserver /readyz", lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
                 180, 1, self.dead)
        self.run("kube-controller-manager", [
            str(self.nbin / "kube-controller-manager"),
            f"--kubeconfig={self.pki.kubeconfig('cm', server, 'system:kube-controller-manager')}",
            "--use-service-account-credentials=true", f"--root-ca-file={self.pki.ca_cert}",
            f"--service-account-private-key-file={self.pki.sa_key}", "--leader-elect=false",
            "--bind-address=127.0.0.1", f"--cluster-signing-cert-file={self.pki.ca_cert}",
            f"--cluster-signing-key-file={self.pki.ca_key}", "--v=1"])
        self.run("kube-scheduler", [
            str(self.nbin / "kube-scheduler"),
            f"--kubeconfig={self.pki.kubeconfig('scheduler', server, 'system:kube-scheduler')}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--v=1"])
        self._containerd(images)
        self._kubelet(server)
        self._kube_proxy(server)
        wait_for("node Ready", self._node_ready, 180, 1, self.dead)

    def _apiserver(self) -> None:
        crt, key = self.pki.issue("apiserver", "kube-apiserver", server=True, client=False,
                                  dns=["kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                       "kubernetes.default.svc.cluster.local", "localhost"],
                                  ips=[NODE_IP, KUBERNETES_SVC_IP, "127.0.0.1"])
        kcrt, kkey = self.pki.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                    ["system:masters"])
        self.run("kube-apiserver", [
            str(self.cbin / "kube-apiserver"), "--etcd-servers=http://127.0.0.1:2379",
            f"--advertise-address={NODE_IP}", "--bind-address=0.0.0.0", "--secure-port=6443",
            f"--service-cluster-ip-range={SERVICE_CIDR}", f"--tls-cert-file={crt}", f"--tls-private-key-file={key}",
            f"--client-ca-file={self.pki.ca_cert}", f"--kubelet-client-certificate={kcrt}",
            f"--kubelet-client-key={kkey}", f"--kubelet-certificate-authority={self.pki.ca_cert}",
            "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.pki.sa_pub}", f"--service-account-signing-key-file={self.pki.sa_key}",
            "--allow-privileged=true", "--profiling=false", f"--cert-dir={self.dir / 'pki' / 'apiserver'}",
            "--v=1"])

    def _containerd(self, images: list[Path]) -> None:
        d = self.dir / "containerd"
        self.socket = d / "containerd.sock"
        (self.dir / "cni" / "net.d" / "10-aiadmit.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "aiadmit-pods",
            "plugins": [{"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
                         "hairpinMode": True,
                         "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]],
                                  "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(self.dir / "cni" / "ipam")}}],
        }))
        cri = '[plugins."io.containerd.grpc.v1.cri"]'
        (d / "config.toml").write_text("\n".join([
            "version = 2", f'root = "{d / "root"}"', f'state = "{d / "state"}"',
            "[grpc]", f'  address = "{self.socket}"', "[ttrpc]", f'  address = "{d / "ttrpc.sock"}"',
            '[plugins."io.containerd.internal.v1.opt"]', f'  path = "{d / "opt"}"',
            cri, f'  sandbox_image = "{PAUSE_REF}"', "  enable_selinux = false",
            # This sandbox's capability bounding set lacks CAP_SYS_RESOURCE, so no process may lower its
            # oom_score_adj (runc failed "can't get final child's PID from pipe: EOF" writing the pause
            # container's -998): clamp containers' scores at containerd's own, as for rootless containerd.
            "  restrict_oom_score_adj = true",
            f'{cri[:-1]}.containerd]', '  snapshotter = "overlayfs"', '  default_runtime_name = "runc"',
            f'{cri[:-1]}.containerd.runtimes.runc]', '  runtime_type = "io.containerd.runc.v2"',
            f'{cri[:-1]}.containerd.runtimes.runc.options]', "  SystemdCgroup = false",
            '  BinaryName = "/usr/sbin/runc"',
            f'{cri[:-1]}.cni]', '  bin_dir = "/usr/lib/cni"', f'  conf_dir = "{self.dir / "cni" / "net.d"}"', ""]))
        self.run("containerd", ["containerd", f"--config={d / 'config.toml'}"])
        wait_for("containerd", lambda: self.ctr("version").returncode == 0, 60, 0.5, self.dead)
        for image in images:
            p = self.ctr("images", "import", "--no-unpack=false", str(image), timeout=300)
            if p.returncode != 0:
                raise RuntimeError(f"ctr images import {image}: {p.stderr}")

    def ctr(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.exec(["ctr", f"--address={self.socket}", "--namespace=k8s.io", *args], timeout=timeout)

    def _make_cgroup_root(self) -> None:
        """A cgroup of the test's own in every hierarchy, under the memory cgroup this process is in."""
        mine = "/"
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "memory" in controllers.split(","):
                mine = path
        self.cgroup_root = f"{mine.rstrip('/')}/aiadmit-{self.netns}"
        root = Path("/sys/fs/cgroup")
        hierarchies = [root] if (root / "cgroup.controllers").exists() else \
            [p for p in root.iterdir() if p.is_dir() and p.name != "unified"]
        for h in hierarchies:
            path = h
            for part in self.cgroup_root.strip("/").split("/"):
                parent, path = path, path / part
                if not path.exists():
                    path.mkdir()
                    for f in ("cpuset.cpus", "cpuset.mems"):  # v1 cpuset: a new cgroup starts empty
                        if (parent / f).exists():
                            (path / f).write_text((parent / f).read_text())

    def _kubelet(self, server: str) -> None:
        self._make_cgroup_root()
        crt, key = self.pki.issue("kubelet-serving", NODE_NAME, server=True, client=False,
                                  dns=[NODE_NAME], ips=[NODE_IP])
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": str(self.pki.ca_cert)}},
            "authorization": {"mode": "AlwaysAllow"},
            "address": NODE_IP, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
            "tlsCertFile": str(crt), "tlsPrivateKeyFile": str(key),
            "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup_root, "failCgroupV1": False,
            "failSwapOn": False, "resolvConf": "", "maxPods": 30,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "registerNode": True, "serializeImagePulls": False,
        }
        path = self.dir / "kubelet" / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        self.run("kubelet", [
            str(self.nbin / "kubelet"), f"--config={path}",
            f"--kubeconfig={self.pki.kubeconfig('kubelet', server, f'system:node:{NODE_NAME}', ['system:nodes'])}",
            f"--root-dir={self.dir / 'kubelet' / 'root'}", f"--hostname-override={NODE_NAME}",
            f"--node-ip={NODE_IP}", "--v=1"])

    def _kube_proxy(self, server: str) -> None:
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration", "mode": "iptables",
            "clientConnection": {"kubeconfig": str(self.pki.kubeconfig('proxy', server, 'system:kube-proxy'))},
            "hostnameOverride": NODE_NAME, "clusterCIDR": POD_CIDR, "bindAddress": NODE_IP,
            "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249",
            # Leave the namespace's conntrack table sizes and timeouts alone (not ours to tune).
            "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
            "iptables": {"localhostNodePorts": False},
        }
        path = self.dir / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump(config))
        self.run("kube-proxy", [str(self.nbin / "kube-proxy"), f"--config={path}", "--v=1"])

    def _node_ready(self) -> bool:
        p = self.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
        if p.returncode != 0:
            return False
        conditions = json.loads(p.stdout)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    # ------------------------------------------------------------------ use
    def kubectl(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120):
        p = subprocess.run([str(self.cbin / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args], input=input,
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p

    @contextlib.contextmanager
    def advertising(self, resource: str, count: int):
        """Advertise `count` of an extended resource (e.g. a fake nvidia.com/gpu) while the block runs, by patching
        the node's status, as Kubernetes' "Advertise Extended Resources for a Node" does: the kubelet keeps
        extended resources that no device plugin of its own reports, and derives allocatable from capacity. No
        device exists; a pod that asks for one is scheduled and run like any other (the kubelet's device manager
        allocates only its plugins' resources). Withdrawn at the end, so that the GPU pods other tests leave
        Pending (they ask for images this node cannot pull) are never scheduled onto the node's cpus."""
        key = resource.replace("~", "~0").replace("/", "~1")

        def patch(ops: list[dict]) -> None:
            self.kubectl("patch", "node", NODE_NAME, "--subresource=status", "--type=json", "-p", json.dumps(ops))

        def status() -> dict:
            return json.loads(self.kubectl("get", "node", NODE_NAME, "-o", "json").stdout)["status"]

        def allocatable() -> str | None:
            return status().get("allocatable", {}).get(resource)

        patch([{"op": "add", "path": f"/status/capacity/{key}", "value": str(count)}])
        try:
            wait_for(f"{count} {resource} in the node's allocatable", lambda: allocatable() == str(count), 60, 0.5,
                     self.dead)
            yield
        finally:
            now = status()
            patch([{"op": "remove", "path": f"/status/{part}/{key}"} for part in ("capacity", "allocatable")
                   if resource in now.get(part, {})])
            wait_for(f"{resource} gone from the node's allocatable", lambda: allocatable() is None, 60, 0.5)

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        if self.forwarder:
            self.forwarder.close()
        if self.holder and self.holder.poll() is None:
            if self.init_pid:  # PID 1 of the node's PID namespace: the kernel ends every process in it
                os.kill(self.init_pid, signal.SIGKILL)
            try:
                self.holder.wait(20)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait(10)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        self._remove_cgroups()
        if self.netns_path:
            nsforward.delete_netns(self.netns)
        # Pod namespaces were bind mounts inside the node's mount namespace, gone with it; their files stay.
        after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
        for name in after - self._netns_before:
            if name.startswith("cni-") and not os.path.ismount(f"/run/netns/{name}"):
                os.unlink(f"/run/netns/{name}")

    def _remove_cgroups(self) -> None:
        if not self.cgroup_root:
            return
        root = Path("/sys/fs/cgroup")
        deadline = time.monotonic() + 20
        for h in [p for p in root.iterdir() if p.is_dir()] + [root]:
            top = h / self.cgroup_root.strip("/")
            if not top.is_dir():
                continue
            for dirpath, _, _ in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
                while True:
                    try:
                        os.rmdir(dirpath)
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.2)


def ready_replicas(node: Node) -> int:
    """readyReplicas of the aiadmit Deployment (0 when unknown)."""
    p = node.kubectl("-n", NAMESPACE, "get", "deployment", "aiadmit", "-o", "jsonpath={.status.readyReplicas}",
                     check=False)
    return int(p.stdout or 0) if p.returncode == 0 else 0
