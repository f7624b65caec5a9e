"""The two images the cluster test imports into containerd: aiadmit's (manifests/image/build.sh, cached under
~/.cache/aiadmit-image) and the pod sandbox image (pause.c, compiled static, cached under ~/.cache/aiadmit-e2e)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
BUILD_SH = REPO / "manifests" / "image" / "build.sh"
OCI_PY = REPO / "manifests" / "image" / "oci.py"
CACHE = Path(os.environ.get("AIADMIT_E2E_CACHE") or Path.home() / ".cache" / "aiadmit-e2e")


def aiadmit_image(timeout: float = 900) -> tuple[Path, dict]:
    """(image directory, report.json) of manifests/image/build.sh: a cache hit in about a second, a cold build
    in about two minutes here (mmdebstrap + wheels from PyPI)."""
    p = subprocess.run(["bash", str(BUILD_SH)], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"manifests/image/build.sh exited {p.returncode}:\n{p.stderr[-3000:]}")
    out = Path(p.stdout.strip().splitlines()[-1])
    return out, json.loads((out / "report.json").read_text())


def pause_image() -> Path:
    """An OCI archive of the sandbox image (aiadmit.local/pause:1): one static binary, uid 65535."""
    source = (HERE / "pause.c").read_bytes()
    key = hashlib.sha256(source + OCI_PY.read_bytes()).hexdigest()[:16]
    out = CACHE / f"pause-{key}"
    archive = out / "pause.tar"
    if archive.exists():
        return archive
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        t = Path(tmp)
        (t / "rootfs").mkdir()
        subprocess.run(["gcc", "-static", "-Os", "-s", "-o", str(t / "rootfs" / "pause"), str(HERE / "pause.c")],
                       check=True, capture_output=True, timeout=120)
        (t / "config.json").write_text(json.dumps({"User": "65535:65535", "Entrypoint": ["/pause"]}))
        subprocess.run([sys.executable, str(OCI_PY), "--out", str(t / "oci"), "--epoch", "1700000000",
                        "--config", str(t / "config.json"), "--ref", "aiadmit.local/pause:1",
                        "--layer", str(t / "rootfs")], check=True, capture_output=True, timeout=120)
        subprocess.run(["tar", "-C", str(t / "oci"), "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
                        "-cf", str(t / "pause.tar"), "oci-layout", "index.json", "blobs"], check=True, timeout=60)
        shutil.move(str(t / "pause.tar"), archive)
    return archive
