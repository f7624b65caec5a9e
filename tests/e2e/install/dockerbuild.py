"""The Dockerfile built without a Docker engine: buildah (`bud`, chroot isolation, vfs storage, no daemon), on a
local base image, since no registry is reachable here.

The base stands in for the Dockerfile's default `python:3.11-slim-bookworm`: what the Dockerfile needs of a base
(CPython 3.11, pip, bash, coreutils, useradd) made of the same Debian bookworm packages and mirrors as
manifests/image/build.sh's root filesystem (`mmdebstrap --variant=minbase` with python3, python3-pip,
python-is-python3 and ca-certificates), imported into a buildah store and handed to the Dockerfile with
`--build-arg PYTHON_IMAGE=...`. Both then run the same Debian interpreter, so the two images' /opt/aiadmit can be
compared file by file (test_dockerfile.py).

PyPI is reached from inside the build (wheels.sh in the first stage). Where this machine's egress re-signs TLS
with its own CA (it does here: the issuer seen for pypi.org is the sandbox's egress CA), the host's CA bundle is
bind-mounted over the base's for the RUN steps only (`buildah bud -v`); it is not committed into any layer.

Cache: ${AIADMIT_IMAGE_CACHE:-~/.cache/aiadmit-image}/dockerfile-<key>/ (aiadmit-dockerfile.tar, an OCI archive,
and report.json), keyed by the Dockerfile, the build context and this file; the base tar per ISO week like
build.sh's Debian part. The buildah store is temporary and removed after each build.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent.parent
CACHE = Path(os.environ.get("AIADMIT_IMAGE_CACHE") or Path.home() / ".cache" / "aiadmit-image")
SUITE = "bookworm"  # manifests/image/platform.sh's DEBIAN_SUITE
MIRRORS = (f"deb http://deb.debian.org/debian {SUITE} main", f"deb http://deb.debian.org/debian {SUITE}-updates main",
           f"deb http://deb.debian.org/debian-security {SUITE}-security main")
BASE_PACKAGES = ("python3", "python3-pip", "python-is-python3", "ca-certificates")
BASE_REF = "localhost/aiadmit-dockerfile-base:bookworm"
REF = "aiadmit:dockerfile"
CONTEXT = ("pyproject.toml", "README.md", "webhook", "policies", "manifests/image")  # what .dockerignore lets in
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def missing() -> str:
    """'' when the Dockerfile can be built here, else why not (exactly)."""
    if os.geteuid() != 0:
        return "buildah with chroot isolation and vfs storage needs root here"
    absent = [t for t in ("buildah", "mmdebstrap") if not shutil.which(t, path=PATH)]
    if absent:
        return f"{' '.join(absent)} not found (apt-get install buildah mmdebstrap)"
    return ""


def _run(argv: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, PATH=PATH), **kw)
    if p.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv[:4])} ...` exited {p.returncode}:\n{(p.stderr or p.stdout)[-3000:]}")
    return p


def _context_hash() -> str:
    h = hashlib.sha256()
    for top in CONTEXT:
        root = REPO / top
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for p in paths:
            if "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            h.update(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _base_tar() -> Path:
    week = time.strftime("%G-W%V", time.gmtime())
    key = hashlib.sha256("\n".join((week, *MIRRORS, *BASE_PACKAGES)).encode()).hexdigest()[:16]
    out = CACHE / f"dockerfile-base-{key}" / "base.tar"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    _run(["mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", "--format=tar", SUITE,
          str(tmp), *MIRRORS], timeout=900)
    tmp.rename(out)
    return out


def dockerfile_image(timeout: float = 900) -> tuple[Path, dict]:
    """(OCI archive of the Dockerfile's image, report) built by buildah; a cache hit returns at once."""
    base = _base_tar()
    key = hashlib.sha256(b"".join([(REPO / "Dockerfile").read_bytes(), Path(__file__).read_bytes(),
                                   _context_hash().encode(), str(base).encode()])).hexdigest()[:16]
    out = CACHE / f"dockerfile-{key}"
    archive = out / "aiadmit-dockerfile.tar"
    if (out / "report.json").exists():
        return archive, json.loads((out / "report.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    for stale in CACHE.glob("buildah-store.*"):  # left by a build that was killed (ci-prepare.sh's timeout)
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=CACHE, prefix="buildah-store.") as store:
        b = ["buildah", f"--root={store}/root", f"--runroot={store}/run", "--storage-driver=vfs"]
        ctr = _run([*b, "from", "scratch"], 60).stdout.strip()
        _run([*b, "add", ctr, str(base), "/"], 300)
        _run([*b, "config", "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
              "--env", "LANG=C.UTF-8", "--cmd", "python3", ctr], 60)
        _run([*b, "commit", "-q", ctr, BASE_REF], 300)
        mounts = ["-v", f"{HOST_CA}:{HOST_CA}:ro"] if HOST_CA.exists() else []
        build = _run([*b, "bud", "--isolation=chroot", "--pull-never", "--layers=false", *mounts,
                      "--build-arg", f"PYTHON_IMAGE={BASE_REF}", "-t", f"localhost/{REF}", "-f",
                      str(REPO / "Dockerfile"), str(REPO)], timeout, cwd=REPO)
        tmp = archive.with_suffix(".tmp")
        _run([*b, "push", "-q", f"localhost/{REF}", f"oci-archive:{tmp}:{REF}"], 300)
        tmp.rename(archive)
    report = {"ref": REF, "base": BASE_REF, "base_tar": str(base), "build_seconds": round(time.monotonic() - started),
              "buildah": _run(["buildah", "--version"], 30).stdout.strip(),
              "log_tail": build.stdout.strip().splitlines()[-3:]}
    (out / "report.json").write_text(json.dumps(report, indent=1))
    return archive, report


def layout(oci_dir: Path) -> tuple[str, dict, dict, list[Path]]:
    """(manifest digest, manifest, config, layer blob paths) of the single image of an OCI image layout."""
    blobs = oci_dir / "blobs" / "sha256"
    digest = json.loads((oci_dir / "index.json").read_text())["manifests"][0]["digest"]
    manifest = json.loads((blobs / digest.split(":")[1]).read_text())
    config = json.loads((blobs / manifest["config"]["digest"].split(":")[1]).read_text())
    return digest, manifest, config, [blobs / l["digest"].split(":")[1] for l in manifest["layers"]]


def tree(layers: list[Path], prefix: str) -> dict[str, tuple]:
    """Every path under `prefix` once the layers are applied in order (whiteouts honoured), as
    (type, mode & 07777, uid, gid, link target, sha256 of the content)."""
    out: dict[str, tuple] = {}
    for blob in layers:
        with tarfile.open(blob) as tar:
            for m in tar:
                name = m.name.removeprefix("./").rstrip("/")
                head, _, base = name.rpartition("/")
                if base == ".wh..wh..opq":
                    for k in [k for k in out if k.startswith(head + "/")]:
                        del out[k]
                    continue
                if base.startswith(".wh."):
                    gone = f"{head}/{base[4:]}" if head else base[4:]
                    for k in [k for k in out if k == gone or k.startswith(gone + "/")]:
                        del out[k]
                    continue
                if name != prefix and not name.startswith(prefix + "/"):
                    continue
                digest = hashlib.sha256(tar.extractfile(m).read()).hexdigest() if m.isfile() else ""
                kind = "file" if m.isfile() else "dir" if m.isdir() else "symlink" if m.issym() else \
                    "hardlink" if m.islnk() else f"type {m.type!r}"
                out[name] = (kind, m.mode & 0o7777, m.uid, m.gid, m.linkname, digest)
    return out
