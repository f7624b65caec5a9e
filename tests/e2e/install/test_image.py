"""The image of manifests/image/build.sh, tested as an image: what it holds, that it rebuilds to the same digest,
that the Dockerfile describes the same layout, and that it serves under runc as the Deployment runs it (uid
65532, read-only root filesystem, no capabilities, a tmpfs /tmp) without any cluster around it.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

import images
import nsforward
from nodeharness import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]
REPO = Path(__file__).resolve().parent.parent.parent.parent


def _layout(image_dir: Path) -> tuple[dict, dict, list[Path]]:
    """(manifest, config, layer blob paths) of the image's OCI layout."""
    blobs = image_dir / "oci" / "blobs" / "sha256"
    index = json.loads((image_dir / "oci" / "index.json").read_text())
    manifest = json.loads((blobs / index["manifests"][0]["digest"].split(":")[1]).read_text())
    config = json.loads((blobs / manifest["config"]["digest"].split(":")[1]).read_text())
    return manifest, config, [blobs / l["digest"].split(":")[1] for l in manifest["layers"]]


@pytest.fixture(scope="module")
def members(image) -> dict[str, tarfile.TarInfo]:
    """Every path of the image (later layers win), as tar headers."""
    out = {}
    for blob in _layout(image[0])[2]:
        with tarfile.open(blob) as tar:
            out.update({m.name.rstrip("/"): m for m in tar.getmembers()})
    return out


def test_image_holds_only_what_serving_needs(image, members):
    report = image[1]
    print(f"image {report['digest']}: {report['compressed_bytes'] / 2**20:.1f} MiB compressed, "
          f"{report['uncompressed_bytes'] / 2**20:.1f} MiB unpacked")
    for absent in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/dpkg", "usr/bin/apt", "usr/bin/tar",
                   "usr/bin/perl", "opt/aiadmit/bin/pip"):
        assert absent not in members, f"{absent} is in the image"
    site = "opt/aiadmit/lib/python3.11/site-packages"
    for absent in ("pip", "setuptools", "pytest", "jsonpatch", "pre_commit", "kubernetes_validate"):
        assert f"{site}/{absent}" not in members, f"{absent} installed in the image"
    for present in ("usr/bin/python3.11", "opt/aiadmit/bin/aiadmit", f"{site}/webhook/policies", "etc/passwd",
                    "var/lib/dpkg/status.d/libssl3", "usr/share/doc/libssl3/copyright"):
        assert present in members, f"{present} missing"
    for name, m in members.items():
        assert (m.uid, m.gid) == (0, 0), f"{name} owned by {m.uid}:{m.gid}"
        assert not m.mode & 0o6000, f"{name} is setuid/setgid"
        if m.mode & 0o002 and not m.issym():
            assert name == "tmp", f"{name} is world-writable"
    # Bytecode for every module, so a read-only root filesystem costs no start-up time.
    assert f"{site}/webhook/app/__pycache__/serving.cpython-311.pyc" in members


def test_image_config_matches_the_dockerfile(image):
    """Both ways of building give one layout: same user, entrypoint, workdir, environment, venv, locks."""
    _, config, _ = _layout(image[0])
    c = config["config"]
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    final = text[text.rindex("\nFROM "):]
    lines = [" ".join(l.split()) for l in final.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    word = lambda w: [l[len(w) + 1:] for l in lines if l.startswith(w + " ")]  # noqa: E731
    assert word("USER") == [c["User"]] == ["65532:65532"]
    assert word("WORKDIR") == [c["WorkingDir"]] == ["/tmp"]
    assert json.loads(word("ENTRYPOINT")[0]) == c["Entrypoint"] == ["aiadmit", "serve"]
    env = dict(kv.split("=", 1) for kv in word("ENV")[0].split())
    image_env = dict(kv.split("=", 1) for kv in c["Env"])
    assert env["PATH"].split(":")[0] == image_env["PATH"].split(":")[0] == "/opt/aiadmit/bin"
    assert {k: v for k, v in env.items() if k != "PATH"} == {k: v for k, v in image_env.items() if k != "PATH"}
    build_sh = (REPO / "manifests" / "image" / "build.sh").read_text()
    for both in ("--require-hashes", "-r /wheels/requirements.lock", "--invalidation-mode unchecked-hash",
                 "venv --without-pip /opt/aiadmit", "--no-index"):
        assert both in " ".join(final.split()) and both in " ".join(build_sh.split()), both
    assert "wheels.sh" in text and "wheels.sh" in build_sh


def test_rebuild_gives_the_same_digest(image, tmp_path):
    """Everything built again (wheels fetched and built, venv, bytecode, layers) into an empty cache holding only
    the Debian part of the first build: the same bytes. The Debian part itself is the same only while the archive
    serves the same versions (it moved during one morning here), so it is seeded, not fetched again."""
    cache = tmp_path / "cache"
    base = Path(image[0]).parent / image[1]["base"]
    cache.mkdir()
    subprocess.run(["cp", "-a", str(base), str(cache / base.name)], check=True, timeout=300)  # hard links too
    env = dict(os.environ, AIADMIT_IMAGE_CACHE=str(cache))
    started = time.monotonic()
    p = subprocess.run(["bash", str(images.BUILD_SH)], capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    again = json.loads((Path(p.stdout.strip().splitlines()[-1]) / "report.json").read_text())
    print(f"cold rebuild in {time.monotonic() - started:.0f} s")
    assert again["digest"] == image[1]["digest"], (again["layers"], image[1]["layers"])


# ------------------------------------------------------------------------------------- under runc
@pytest.fixture(scope="module")
def container(image, tmp_path_factory):
    """The image run by runc as the Deployment runs it, in a network namespace of its own; yields
    (runc argv prefix, container id, forwarder to its 8443, CA file)."""
    for tool in ("runc", "ip", "tar"):
        if not shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            pytest.skip(f"{tool} not found (apt-get install runc iproute2)")
    work = Path(tmp_path_factory.mktemp("runc"))
    rootfs = work / "bundle" / "rootfs"
    rootfs.mkdir(parents=True)
    _, config, layers = _layout(image[0])
    for blob in layers:
        subprocess.run(["tar", "-xzf", str(blob), "-C", str(rootfs), "--numeric-owner"], check=True, timeout=120)
    certs = work / "certs"
    subprocess.run([sys.executable, "-m", "webhook", "certs", "generate", "--out", str(certs), "--service", "aiadmit",
                    "--namespace", "aiadmit-system"], check=True, capture_output=True, timeout=60,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    for f in certs.iterdir():  # what the Secret volume gives the pod: readable by its group (fsGroup)
        os.chown(f, 0, 65532)
        f.chmod(0o440)
    netns = f"aiadmit-img-{uuid.uuid4().hex[:6]}"
    netns_path = nsforward.create_netns(netns)
    runc = ["runc", f"--root={work / 'runc-state'}"]
    cid = f"aiadmit-image-{uuid.uuid4().hex[:6]}"
    mine = next((l.split(":", 2)[2] for l in Path("/proc/self/cgroup").read_text().splitlines()
                 if "memory" in l.split(":", 2)[1].split(",")), "/")
    c = config["config"]
    spec = {
        "ociVersion": "1.0.2", "hostname": "aiadmit",
        "root": {"path": "rootfs", "readonly": True},
        "process": {
            "terminal": False, "user": {"uid": 65532, "gid": 65532, "additionalGids": [65532]},
            "args": c["Entrypoint"] + ["--no-cluster", "--cert-file=/certs/tls.crt", "--key-file=/certs/tls.key",
                                       "--port=8443", "--workers=1"],
            "env": c["Env"], "cwd": c["WorkingDir"], "noNewPrivileges": True,
            "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")},
        },
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            # The Deployment's emptyDir on /tmp (64Mi), where the server writes what it writes.
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/certs", "type": "bind", "source": str(certs), "options": ["rbind", "ro"]},
        ],
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")]
            + [{"type": "network", "path": netns_path}],
            "cgroupsPath": f"{mine.rstrip('/')}/{cid}",
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
        },
    }
    (work / "bundle" / "config.json").write_text(json.dumps(spec))
    log = open(work / "container.log", "wb")
    proc = subprocess.Popen([*runc, "run", "--bundle", str(work / "bundle"), cid], stdout=log, stderr=subprocess.STDOUT)
    forwarder = nsforward.Forwarder(netns_path, ("127.0.0.1", 8443))
    try:
        yield runc, cid, forwarder, certs / "ca.crt", work / "container.log", proc
    finally:
        forwarder.close()
        subprocess.run([*runc, "kill", cid, "KILL"], capture_output=True, timeout=30)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        subprocess.run([*runc, "delete", "--force", cid], capture_output=True, timeout=30)
        nsforward.delete_netns(netns)


def _get(forwarder, ca: Path, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False  # the chain is verified; the certificate names the Service, not 127.0.0.1
    req = urllib.request.Request(f"https://127.0.0.1:{forwarder.port}{path}", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        return r.status, r.read()


def test_image_serves_as_non_root_on_a_read_only_root_filesystem(container):
    runc, cid, forwarder, ca, log, proc = container
    alive = lambda: "" if proc.poll() is None else f"exited {proc.returncode}: {log.read_text()[-2000:]}"  # noqa: E731
    wait_for("/healthz and /readyz", lambda: _get(forwarder, ca, "/healthz")[0] == 200 and
             _get(forwarder, ca, "/readyz")[0] == 200, 90, 0.5, alive)
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
        "namespace": "team-a", "name": "p", "userInfo": {"username": "u"},
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
                   "spec": {"containers": [{"name": "c", "image": "r/i:1",
                                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    status, body = _get(forwarder, ca, "/validate", json.dumps(review).encode())
    response = json.loads(body)["response"]
    assert status == 200 and response["allowed"] is False and "resources-declared" in response["status"]["message"]
    probe = ("import os, errno\n"
             "print(os.getuid(), os.getgid())\n"
             "for path in ('/opt/aiadmit/x', '/etc/x', '/usr/x'):\n"
             "    try:\n        open(path, 'w')\n        print('WROTE', path)\n"
             "    except OSError as e:\n        print(errno.errorcode[e.errno])\n"
             "open('/tmp/ok', 'w').write('x'); print('tmp ok')\n"
             "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n")
    p = subprocess.run([*runc, "exec", cid, "/opt/aiadmit/bin/python", "-c", probe], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["65532", "65532", "EROFS", "EROFS", "EROFS", "tmp", "ok", "0000000000000000"], p.stdout
