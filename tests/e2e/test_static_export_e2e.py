"""`aiadmit export --format static` on a kube-apiserver v1.37.2 started with those files (issue 23, item 1 `static`).

The API server reads static admission policies from the `staticManifestsDir` of each plugin's configuration in its
`--admission-control-config-file`: `ValidatingAdmissionPolicyConfiguration` for the plugin ValidatingAdmissionPolicy
and `MutatingAdmissionPolicyConfiguration` for MutatingAdmissionPolicy (`apiserver.config.k8s.io/v1`, k8s.io/apiserver
v0.37.2 pkg/admission/plugin/policy/config/apis/policyconfig/v1/types.go), behind the feature gate
ManifestBasedAdmissionControlConfig (beta and on by default in 1.37: pkg/features/kube_features.go). Its loader
(pkg/admission/plugin/policy/manifest/loader/loader.go) refuses a static policy with `paramKind` or a binding with
`paramRef`, which is why `--format static` folds the params in; names must end in `.static.k8s.io`.

A control plane of its own (etcd + kube-apiserver, conftest's ControlPlane) is started with the exported
directories: it starts (a file it cannot load stops it), a pod that an exported deny rule fails is denied by the
static policy by name, and a pod in an untrusted namespace comes back hardened by the static
MutatingAdmissionPolicy. No API object holds these policies.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.e2e


def _e2e_helpers():
    """tests/e2e/conftest.py, loaded by path (`import conftest` could be tests/conftest.py in the whole suite)."""
    spec = importlib.util.spec_from_file_location("aiadmit_e2e_plane", Path(__file__).with_name("conftest.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_helpers = _e2e_helpers()
ControlPlane, E2ESetupError, KubectlError = _helpers.ControlPlane, _helpers.E2ESetupError, _helpers.KubectlError
ensure_binaries = _helpers.ensure_binaries
REPO = Path(__file__).resolve().parents[2]

# denied by devices-declared `visible-devices-env` (a device variable without a device), the params folded in
ALL_DEVICES = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "all-devices"},
               "spec": {"containers": [{"name": "main", "image": "busybox@sha256:" + "0" * 64,
                                        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}
PLAIN = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
         "spec": {"containers": [{"name": "main", "image": "busybox@sha256:" + "0" * 64}]}}


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    work = tmp_path_factory.mktemp("static-export")
    try:
        bin_dir = ensure_binaries(work / "build.log")
    except E2ESetupError as exc:
        pytest.fail(str(exc), pytrace=False)
    out = work / "static"
    done = subprocess.run([sys.executable, "-m", "webhook", "export", "--format", "static", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert done.returncode == 0, done.stderr
    assert list((out / "validating-policies").glob("*.yaml")) and list((out / "mutating-policies").glob("*.yaml"))
    assert not (out / "crds").exists()  # static policies read no param object
    admission = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": [
        {"name": "ValidatingAdmissionPolicy",
         "configuration": {"apiVersion": "apiserver.config.k8s.io/v1",
                           "kind": "ValidatingAdmissionPolicyConfiguration",
                           "staticManifestsDir": str(out / "validating-policies")}},
        {"name": "MutatingAdmissionPolicy",
         "configuration": {"apiVersion": "apiserver.config.k8s.io/v1",
                           "kind": "MutatingAdmissionPolicyConfiguration",
                           "staticManifestsDir": str(out / "mutating-policies")}}]}
    (work / "admission.yaml").write_text(yaml.safe_dump(admission))
    (work / "plane").mkdir()
    control = ControlPlane(bin_dir, work / "plane")
    control.extra_args = [f"--admission-control-config-file={work / 'admission.yaml'}"]
    try:
        control.start()
    except E2ESetupError as exc:
        control.stop()
        pytest.fail(f"kube-apiserver did not start with the static manifests:\n{exc}", pytrace=False)
    try:
        control.kubectl("create", "namespace", "static-e2e")
        control.kubectl("apply", "-f", "-", input=yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": "static-untrusted", "labels": {"aiadmit.dev/tier": "untrusted"}}}))
        yield control
    finally:
        control.stop()


def _dry_run(plane, obj: dict, namespace: str) -> subprocess.CompletedProcess:
    return plane.kubectl("create", "--dry-run=server", "-o", "json", "-n", namespace, "-f", "-",
                         input=json.dumps(obj), check=False)


def test_the_static_validating_policy_denies_by_its_static_name(plane):
    done = _dry_run(plane, ALL_DEVICES, "static-e2e")
    assert done.returncode != 0, done.stdout[-500:]
    assert "ValidatingAdmissionPolicy 'aiadmit-devices-declared.static.k8s.io'" in done.stderr, done.stderr
    assert "NVIDIA_VISIBLE_DEVICES" in done.stderr, done.stderr
    allowed = _dry_run(plane, PLAIN, "static-e2e")
    assert allowed.returncode == 0, allowed.stderr
    # the static policies are not API objects
    listed = json.loads(plane.kubectl("get", "validatingadmissionpolicies", "-o", "json").stdout)["items"]
    assert not [p for p in listed if p["metadata"]["name"].endswith(".static.k8s.io")]


def test_the_static_mutating_policy_hardens_an_untrusted_pod(plane):
    done = _dry_run(plane, PLAIN, "static-untrusted")
    assert done.returncode == 0, done.stderr
    pod = json.loads(done.stdout)
    assert pod["spec"]["automountServiceAccountToken"] is False
    context = pod["spec"]["containers"][0]["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["runAsNonRoot"] is True, context
    assert "ALL" in context["capabilities"]["drop"], context
    plain = json.loads(_dry_run(plane, PLAIN, "static-e2e").stdout)
    assert "automountServiceAccountToken" not in plain["spec"]  # only where the tier is untrusted
