"""`aiadmit audit --cluster --format openreports --apply-reports` against the real kube-apiserver, with the published
OpenReports CRDs installed (tests/data/openreports-crds.yaml: structural schemas, so a field they do not know would
be pruned, and a wrong type rejected). What is stored must be exactly what was printed.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from crdwait import wait_established

pytestmark = pytest.mark.e2e

CRDS = os.path.join(os.path.dirname(__file__), "..", "data", "openreports-crds.yaml")
GPU = {"name": "main", "image": "registry.example/serve:v1", "resources": {"limits": {"nvidia.com/gpu": 1}}}


def aiadmit(*args):
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def audited(apiserver):
    namespace = f"openreports-{os.urandom(3).hex()}"
    apiserver.kubectl("create", "namespace", namespace)
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
             "spec": {"containers": [container]}}
            for name, container in [("gpu-pod", GPU)] + [(f"plain-{i}", {"name": "main", "image": "pause:3.10"})
                                                          for i in range(40)]]
    apiserver.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(pods))
    return namespace


def test_openreports_applied_stored_unpruned_replaced_and_cleaned(apiserver, audited):
    namespace = audited
    base = ("audit", "--cluster", "--kubeconfig", str(apiserver.kubeconfig), "-n", namespace,
            "-f", "openreports", "--apply-reports")
    if apiserver.kubectl("get", "crd", "reports.openreports.io", check=False).returncode != 0:
        missing = aiadmit(*base)
        assert missing.returncode == 2 and "is the openreports.io Report CRD installed?" in missing.stderr, \
            missing.stderr
    apiserver.kubectl("apply", "--server-side", "-f", CRDS)
    for crd in ("reports.openreports.io", "clusterreports.openreports.io"):
        wait_established(apiserver.kubectl, f"crd/{crd}")
    first = aiadmit(*base)
    assert first.returncode == 1, first.stderr  # the GPU pod has deny-level findings
    assert f"created Report {namespace}/aiadmit-{namespace}" in first.stderr
    printed = [d for d in yaml.safe_load_all(first.stdout) if d]
    stored = apiserver.kubectl_json("get", "reports.openreports.io", "-n", namespace)["items"]
    assert [r["metadata"]["name"] for r in stored] == [f"aiadmit-{namespace}"]
    (report,) = stored
    (wrote,) = printed
    for key in ("source", "summary", "results"):
        assert report[key] == wrote[key], key  # nothing pruned or altered by the CRD's schema
    assert report["summary"]["fail"] > 0 and report["summary"]["pass"] > 0
    assert report["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "aiadmit"
    # split by a small size limit, then back: the stale second report is deleted; PolicyReports are not touched
    second = aiadmit(*base, "--max-report-bytes", "10000")
    assert second.returncode == 1, second.stderr
    names = sorted(r["metadata"]["name"] for r in
                   apiserver.kubectl_json("get", "reports.openreports.io", "-n", namespace)["items"])
    assert names[0] == f"aiadmit-{namespace}" and len(names) >= 2, names
    third = aiadmit(*base)
    assert "deleted stale Report" in third.stderr, third.stderr
    assert [r["metadata"]["name"] for r in
            apiserver.kubectl_json("get", "reports.openreports.io", "-n", namespace)["items"]] == [f"aiadmit-{namespace}"]
