"""The Dockerfile, built (buildah, no Docker engine; dockerbuild.py), against manifests/image/build.sh's image:
the same user, entrypoint, workdir, environment and ports, the same installed packages at the same versions, and
the same /opt/aiadmit file for file (path, type, mode, owner, link target, content). What the two differ in is
the base below /opt/aiadmit (Debian python3 with a shell and dpkg here; python:3.11-slim with Docker), which is
what the Dockerfile's build argument chooses.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import dockerbuild

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]
APP = "opt/aiadmit"
SITE = f"{APP}/lib/python3.11/site-packages"
OURS = ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")


@pytest.fixture(scope="module")
def built(image, tmp_path_factory):
    why = dockerbuild.missing()
    if why:
        pytest.skip(f"the Dockerfile cannot be built here: {why}")
    archive, report = dockerbuild.dockerfile_image()
    oci = Path(tmp_path_factory.mktemp("dockerfile")) / "oci"
    oci.mkdir()
    subprocess.run(["tar", "-xf", str(archive), "-C", str(oci)], check=True, timeout=120)
    digest, manifest, config, layers = dockerbuild.layout(oci)
    size = sum(l["size"] for l in manifest["layers"])
    print(f"Dockerfile image {digest} ({report['buildah']}, built in {report['build_seconds']} s): "
          f"{size / 2**20:.1f} MiB compressed in {len(layers)} layers")
    return config, layers, dockerbuild.tree(layers, APP)


@pytest.fixture(scope="module")
def script(image):
    _, _, config, layers = dockerbuild.layout(image[0] / "oci")
    return config, layers, dockerbuild.tree(layers, APP)


def _packages(tree: dict) -> dict[str, str]:
    """name -> version of every distribution installed in the venv (from its dist-info directory names)."""
    out = {}
    for path, entry in tree.items():
        m = re.fullmatch(rf"{re.escape(SITE)}/([^/]+)-([^/-]+)\.dist-info", path)
        if m and entry[0] == "dir":
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def test_dockerfile_image_runs_as_the_script_image_does(built, script):
    d, s = built[0]["config"], script[0]["config"]
    for key in ("User", "Entrypoint", "WorkingDir", "ExposedPorts"):
        assert d.get(key) == s.get(key), (key, d.get(key), s.get(key))
    denv = dict(kv.split("=", 1) for kv in d["Env"])
    senv = dict(kv.split("=", 1) for kv in s["Env"])
    assert {k: denv.get(k) for k in OURS} == {k: senv[k] for k in OURS} == {k: "1" for k in OURS}
    assert denv["PATH"].split(":")[0] == senv["PATH"].split(":")[0] == "/opt/aiadmit/bin"
    # The base's own variables (LANG here, PYTHON_VERSION and GPG_KEY in python:3.11-slim) come on top.
    print("environment only in the Dockerfile's image (from its base):",
          sorted(set(denv) - set(senv)))


def test_dockerfile_image_has_the_same_packages_at_the_same_versions(built, script):
    dtree, stree = built[2], script[2]
    dp, sp = _packages(dtree), _packages(stree)
    assert dp == sp, (set(dp.items()) ^ set(sp.items()))
    lock = Path(__file__).resolve().parents[3] / "manifests" / "image" / "requirements.lock"
    pinned = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\;]+)", lock.read_text(), re.M))
    pinned = {k.lower().replace("_", "-").replace(".", "-"): v for k, v in pinned.items()}
    got = {k.replace(".", "-"): v for k, v in dp.items()}
    assert {k: got.get(k) for k in pinned} == pinned
    assert set(got) - set(pinned) == {"aiadmit"}, set(got) - set(pinned)
    print(f"{len(dp)} distributions, the same in both:", ", ".join(f"{k} {v}" for k, v in sorted(dp.items())))


def test_dockerfile_image_has_the_same_app_dir_file_for_file(built, script):
    dtree, stree = built[2], script[2]
    only_d = sorted(set(dtree) - set(stree))
    only_s = sorted(set(stree) - set(dtree))
    differ = sorted(k for k in set(dtree) & set(stree) if dtree[k] != stree[k])
    assert not only_d and not only_s and not differ, (
        f"only in the Dockerfile's image: {only_d[:10]}; only in build.sh's: {only_s[:10]}; "
        f"different: {[(k, dtree[k], stree[k]) for k in differ[:5]]}")
    files = sum(1 for e in stree.values() if e[0] == "file")
    print(f"/{APP}: {len(stree)} paths ({files} files) identical in both images")


def test_dockerfile_image_user_exists_and_nothing_is_left_of_the_build(built):
    etc = dockerbuild.tree(built[1], "etc")
    assert "etc/passwd" in etc and "etc/group" in etc
    root = dockerbuild.tree(built[1], "wheels") | dockerbuild.tree(built[1], "src")
    assert not root, sorted(root)[:10]  # the build stage's wheels and sources stay in the build stage
    app = built[2]
    assert f"{APP}/bin/pip" not in app and not any(k.startswith(f"{SITE}/pip/") for k in app)
    assert not any(k.endswith("direct_url.json") for k in app)
    assert json.dumps(built[0]["config"]["User"]) == '"65532:65532"'
