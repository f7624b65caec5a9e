"""The documented installs, run: aiadmit's image in a real single-node cluster, called by the API server.

The node (nodeharness.py) runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy and a
kubelet with containerd and runc. Every test here is one step of one scenario, run once per install (conftest.py,
`installed`, parametrized): the dev overlay applied unchanged, then the Helm chart installed by `helm install`
with only the image reference and certificate source set, the first uninstalled before the second starts. Every
request below goes through the API server, which reaches the webhook pods through their Service (kube-proxy's rules),
as in any cluster. Not shown here: the NetworkPolicy (the CNI bridge plugin enforces none) and the spread over
nodes (one node: both replicas land on it, which the hard spread allows since every domain has the same count).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from kubernetes.utils import parse_quantity

import dockerbuild
import installs
from gpuadmission import DENIED, UNREACHABLE, dry_run, gpu_pod, make_gpu_namespace
from nodeharness import NAMESPACE, NODE_NAME, PAUSE_REF, ready_replicas, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]


@pytest.fixture(scope="module")
def gpu_namespace(node, api):
    return make_gpu_namespace(api)


def has_dshm(pod: dict | None) -> bool:
    return any(v.get("name") == "dshm" for v in (pod or {}).get("spec", {}).get("volumes") or [])


def webhook_pods(node) -> list[dict]:
    p = node.kubectl("-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=aiadmit", "-o", "json")
    return [pod for pod in json.loads(p.stdout)["items"] if not pod["metadata"].get("deletionTimestamp")]


# ------------------------------------------------------------------------------------------------ scenarios
def test_both_replicas_of_the_built_image_are_ready(node, image, installed):
    deployment = json.loads(node.kubectl("-n", NAMESPACE, "get", "deployment", "aiadmit", "-o", "json").stdout)
    managed = deployment["metadata"]["labels"].get("app.kubernetes.io/managed-by")
    assert managed == ("Helm" if installed.how == "helm" else None), deployment["metadata"]["labels"]
    pods = webhook_pods(node)
    assert len(pods) == 2
    manifest = json.loads((image[0] / "oci" / "index.json").read_text())["manifests"][0]["digest"]
    blob = json.loads((image[0] / "oci" / "blobs" / "sha256" / manifest.split(":")[1]).read_text())
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"], status
        assert status["image"] == "docker.io/library/aiadmit:dev"
        assert status["imageID"] in (blob["config"]["digest"], f"docker.io/library/aiadmit:dev@{manifest}"), status
        assert status["restartCount"] == 0, status
    print(f"node up in {node.started_in:.1f} s; {installed.how} install to 2 ready replicas in "
          f"{installed.seconds:.1f} s")


def test_noncompliant_gpu_pod_is_denied_naming_the_policy(node, api, gpu_namespace):
    status, message, _ = dry_run(api, gpu_pod("no-requests", gpu_namespace, requests=False))
    assert status == 403 and DENIED in message, message
    assert "resources-declared" in message, message
    p = node.kubectl("apply", "-f", "-", input=json.dumps(gpu_pod("no-requests", gpu_namespace, requests=False)),
                     check=False)
    assert p.returncode == 1 and DENIED in p.stderr and "resources-declared" in p.stderr, p.stderr
    assert node.kubectl("-n", gpu_namespace, "get", "pod", "no-requests", "--ignore-not-found").stdout == ""


def test_compliant_gpu_pod_is_created_with_its_mutation_stored(node, gpu_namespace):
    p = node.kubectl("apply", "-f", "-", input=json.dumps(gpu_pod("compliant", gpu_namespace)), check=False)
    assert p.returncode == 0, p.stderr
    pod = json.loads(node.kubectl("-n", gpu_namespace, "get", "pod", "compliant", "-o", "json").stdout)
    assert {"name": "dshm", "mountPath": "/dev/shm"} in pod["spec"]["containers"][0]["volumeMounts"]
    (dshm,) = [v for v in pod["spec"]["volumes"] if v["name"] == "dshm"]
    assert dshm["emptyDir"]["medium"] == "Memory", dshm


def test_deployment_pods_are_created_by_the_controller(node, gpu_namespace):
    name = "serve"
    template = gpu_pod("x", gpu_namespace)["spec"]
    # A serving workload: the classes inference may use, and a readiness probe on the model server.
    template["priorityClassName"] = "ai-inference"
    template["containers"][0]["readinessProbe"] = {"httpGet": {"path": "/health", "port": 8000}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": gpu_namespace},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                           "template": {"metadata": {"labels": {"app": name}}, "spec": template}}}
    p = node.kubectl("apply", "-f", "-", input=json.dumps(deployment), check=False)
    assert p.returncode == 0, p.stderr

    def pods():
        out = node.kubectl("-n", gpu_namespace, "get", "pods", "-l", f"app={name}", "-o", "json").stdout
        items = json.loads(out)["items"]
        return items if len(items) == 2 else None

    items = wait_for("the ReplicaSet controller to create 2 pods", pods, 60, 1)
    for pod in items:  # created by the controller, through both webhooks
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        assert any(v["name"] == "dshm" for v in pod["spec"]["volumes"]), pod["spec"]["volumes"]


def _resized(node, name: str, namespace: str, patch: dict) -> subprocess.CompletedProcess:
    return node.kubectl("-n", namespace, "patch", "pod", name, "--subresource", "resize", "-p", json.dumps(patch),
                        check=False)


def _same(resources: dict, expected: dict) -> bool:
    """`resources` (requests/limits as the API shows them) has every quantity of `expected`, compared as numbers."""
    return all(parse_quantity((resources.get(kind) or {}).get(r, "-1")) == parse_quantity(v)
               for kind, values in expected.items() for r, v in values.items())


def test_a_resize_of_a_running_gpu_pod_is_refused_or_applied_by_the_kubelet(node, gpu_namespace):
    """Issue 22: in-place resize (pods/resize, GA in 1.35) of a running GPU pod on this node, through both
    webhooks as installed. While the node advertises four fake nvidia.com/gpu (its status patched), a GPU pod runs
    the sandbox image, which is already on the node. A resize to a zero cpu request (resources-declared) and one
    taking memory below the pod's 2Gi /dev/shm (shm-sized) are refused and change nothing; one that keeps the
    checklist (1.5 cpu, memory limit 9Gi) is admitted, and the kubelet applies it: the container's status reports
    the new resources. Below the per-device cpu floor (1 per GPU, a warn-level rule) a resize is admitted with the
    floor's warning. The pod is deleted at the end, so that it holds none of the
    node's 2 cpus when the next tests delete and recreate the webhook's replicas."""
    with node.advertising("nvidia.com/gpu", 4):
        _resize_a_running_gpu_pod(node, gpu_namespace)


def _resize_a_running_gpu_pod(node, gpu_namespace: str) -> None:
    name = "resize"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": gpu_namespace},
           "spec": {"priorityClassName": "ai-batch", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "train", "image": PAUSE_REF, "imagePullPolicy": "Never", "resources": {
                        "requests": {"cpu": "1", "memory": "4Gi", "ephemeral-storage": "1Gi"},
                        "limits": {"nvidia.com/gpu": "1", "memory": "8Gi"}}}]}}
    p = node.kubectl("apply", "-f", "-", input=json.dumps(pod), check=False)
    assert p.returncode == 0, p.stderr

    def get() -> dict:
        return json.loads(node.kubectl("-n", gpu_namespace, "get", "pod", name, "-o", "json").stdout)

    def describe() -> str:
        return node.kubectl("-n", gpu_namespace, "describe", "pod", name, check=False).stdout[-3000:]

    try:
        def running():
            current = get()
            statuses = current["status"].get("containerStatuses") or []
            return current if statuses and "running" in statuses[0].get("state", {}) else None

        try:
            current = wait_for("the GPU pod to run", running, 180, 1, node.dead)
        except TimeoutError as exc:
            pytest.fail(f"{exc}\n{describe()}", pytrace=False)
        assert current["spec"]["nodeName"] == NODE_NAME
        (dshm,) = [v for v in current["spec"]["volumes"] if v["name"] == "dshm"]
        assert dshm["emptyDir"] == {"medium": "Memory", "sizeLimit": "2Gi"}, dshm  # a quarter of 8Gi
        before = current["status"]["containerStatuses"][0].get("resources") or {}
        assert _same(before, {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}), before

        for patch, policy in (
                ({"requests": {"cpu": "0"}}, "resources-declared"),
                ({"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}, "shm-sized")):
            p = _resized(node, name, gpu_namespace, {"spec": {"containers": [{"name": "train", "resources": patch}]}})
            assert p.returncode == 1 and DENIED in p.stderr and f"{policy}: " in p.stderr, (patch, p.stderr)
        unchanged = get()
        assert unchanged["spec"]["containers"][0]["resources"] == current["spec"]["containers"][0]["resources"]
        assert unchanged["metadata"]["generation"] == current["metadata"]["generation"]

        kept = {"requests": {"cpu": "1500m"}, "limits": {"memory": "9Gi"}}
        started = time.monotonic()
        p = _resized(node, name, gpu_namespace, {"spec": {"containers": [{"name": "train", "resources": kept}]}})
        assert p.returncode == 0, p.stderr
        assert _same(get()["spec"]["containers"][0]["resources"], kept)
        last: list = []

        def applied() -> bool:
            current = get()
            last[:] = [current["status"]["containerStatuses"][0].get("resources"),
                       [c for c in current["status"].get("conditions", []) if c["type"].startswith("PodResize")]]
            return _same(last[0] or {}, kept) and not last[1]

        try:
            wait_for("the kubelet to apply the resize", applied, 120, 1, node.dead)
        except TimeoutError as exc:
            pytest.fail(f"{exc}; container status resources {last[0]}, resize conditions {last[1]}\n{describe()}",
                        pytrace=False)
        took = time.monotonic() - started
        # The per-device floors are warn-level (policies/resources-declared.yaml): below them a resize is admitted
        # with the floor's warning, as a create would be.
        p = _resized(node, name, gpu_namespace, {"spec": {"containers": [{"name": "train", "resources": {
            "requests": {"cpu": "500m"}}}]}})
        assert p.returncode == 0, p.stderr
        assert "Warning: resources-declared: container train requests 500m cpu for 1 device(s); at least 1 per " \
            "device" in p.stderr, p.stderr
        print(f"resizes to 0 cpu and below /dev/shm refused; 1.5 cpu / 9Gi applied by the kubelet {took:.1f} s "
              f"after the patch; 500m cpu admitted with the floor's warning")
    finally:
        node.kubectl("-n", gpu_namespace, "delete", "pod", name, "--ignore-not-found", "--grace-period=0",
                     "--force", "--wait=true", "--timeout=60s", check=False, timeout=90)


def _stream(api, namespace: str, seconds: float, until=lambda: False) -> list[tuple[float, int, str, bool]]:
    """Dry-run creates, alternately compliant and not, for `seconds` (then until `until()`, at most 120 s more):
    (time, status, message, mutated) of each."""
    results, start, i = [], time.monotonic(), 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed > seconds and (until() or elapsed > seconds + 120):
            return results
        compliant = i % 2 == 0
        status, message, pod = dry_run(api, gpu_pod(f"s-{i}", namespace, requests=compliant))
        results.append((elapsed, status, message, has_dshm(pod)))
        i += 1
        time.sleep(0.05)


def _judge(results) -> list[str]:
    """Creates that were not answered by the webhook: a compliant one not admitted (and mutated), a non-compliant
    one not denied by the policy."""
    lost = []
    for i, (t, status, message, mutated) in enumerate(results):
        ok = (status == 201 and mutated) if i % 2 == 0 else (status == 403 and DENIED in message)
        if not ok:
            lost.append(f"{t:.1f}s #{i}: {status} mutated={mutated} {message[:200]}")
    return lost


def test_deleting_one_replica_under_a_stream_of_creates_loses_no_admission(node, api, gpu_namespace):
    victim = webhook_pods(node)[0]["metadata"]["name"]
    node.kubectl("-n", NAMESPACE, "delete", "pod", victim, "--wait=false")
    results = _stream(api, gpu_namespace, 30, until=lambda: ready_replicas(node) == 2)
    lost = _judge(results)
    assert len(results) >= 30, f"not a stream: {len(results)} creates"  # ~280 in 30 s on an idle machine
    assert not lost, f"{len(lost)} of {len(results)} creates not answered by aiadmit:\n" + "\n".join(lost[:20])
    assert victim not in {p["metadata"]["name"] for p in webhook_pods(node)}
    print(f"{len(results)} creates over {results[-1][0]:.1f} s while {victim} was replaced: none lost")


def test_deleting_both_replicas_fails_closed_then_recovers(node, api, gpu_namespace):
    """docs/operations.md, Failure modes, "every replica down": creates are rejected by the API server
    (`failed calling webhook`), or, when only the mutating call found no replica (it fails open), admitted
    unmutated and denied by the validating webhook for the default they lack; never admitted unchecked.
    aiadmit-system is not affected, so the Deployment recreates its pods, and admission resumes once they are
    ready. The API server's open connections to the deleted pods may be black-holed rather than refused, so the
    first calls can wait out the 5 s timeoutSeconds (the "unreachable but not refusing" row)."""
    # Cordoned first, so that the replacements cannot start before the deleted pods stop answering (on a busy
    # machine they did once, and no create was ever rejected): the outage is certain, its end is the uncordon.
    node.kubectl("cordon", NODE_NAME)
    names = [p["metadata"]["name"] for p in webhook_pods(node)]
    node.kubectl("-n", NAMESPACE, "delete", "pod", *names, "--grace-period=0", "--force")
    down = time.monotonic()
    outcomes = []

    def create() -> int:
        status, message, pod = dry_run(api, gpu_pod(f"r-{uuid.uuid4().hex[:5]}", gpu_namespace))
        outcomes.append((time.monotonic() - down, status, message, has_dshm(pod)))
        return status

    # The deleted pods' containers are killed within seconds; until then they still answer. Then nothing
    # answers until a new pod passes /readyz.
    try:
        wait_for("creates to be rejected with both replicas gone", lambda: create() != 201, 60, 0.2)
        # What a user sees meanwhile: kubectl's own output for one create (docs/operations.md quotes it).
        seen = node.kubectl("create", "--dry-run=server", "-f", "-", check=False,
                            input=json.dumps(gpu_pod(f"k-{uuid.uuid4().hex[:5]}", gpu_namespace)))
        # aiadmit-system is not sent to the webhook: the ReplicaSet's replacements were admitted meanwhile.
        replacements = [p["metadata"]["name"] for p in webhook_pods(node)]
        assert len(replacements) == 2 and not set(replacements) & set(names), replacements
    finally:
        node.kubectl("uncordon", NODE_NAME)
    back = time.monotonic()
    wait_for("admission to resume", lambda: create() == 201, 180, 0.2)
    assert all(o[3] for o in outcomes if o[1] == 201), [o for o in outcomes if o[1] == 201 and not o[3]]
    rejected = [o for o in outcomes if o[1] != 201]
    assert rejected, f"no create was rejected while both replicas were down: {outcomes[:5]}"
    unreachable = [o for o in rejected if UNREACHABLE in o[2]]
    # The mutating webhook fails open (failurePolicy Ignore): a create whose /mutate call found no replica but
    # whose /validate call reached a new one is admitted unmutated, then denied for the default it lacks.
    unmutated = [o for o in rejected if DENIED in o[2] and "shm-sized" in o[2]]
    others = [o for o in rejected if o not in unreachable and o not in unmutated]
    assert not others, others  # fail closed, never admitted unchecked
    assert seen.returncode == 1 and (UNREACHABLE in seen.stderr or "shm-sized" in seen.stderr), seen
    wait_for("2 ready replicas again", lambda: ready_replicas(node) == 2, 120, 1)
    print(f"both replicas down: {len(rejected)} of {len(outcomes)} creates rejected ({len(unreachable)} "
          f"unreachable, {len(unmutated)} unmutated then denied), first answered at {rejected[0][0]:.1f} s: "
          f"{rejected[0][2][:300]}; admission back {time.monotonic() - back:.1f} s after the uncordon; kubectl said: "
          f"{seen.stderr.strip()}")


@pytest.mark.parametrize("installed", ["helm"], indirect=True)
def test_the_dockerfile_image_serves_in_the_cluster(node, installed, api, gpu_namespace):
    """The Dockerfile's image (built by buildah, test_dockerfile.py) rolled out by `helm upgrade` over the running
    release, as an upgrade to a new image is done: both new replicas Ready, and the webhook answers from them."""
    why = dockerbuild.missing()
    if why:
        pytest.skip(f"the Dockerfile cannot be built here: {why}")
    archive, _ = dockerbuild.dockerfile_image()
    p = node.ctr("images", "import", "--digests", str(archive), timeout=300)
    assert p.returncode == 0, p.stderr
    # buildah names the image only by the OCI ref.name "aiadmit:dockerfile", which containerd keeps as it is;
    # the kubelet asks for the normalised "docker.io/library/aiadmit:dockerfile": tag it by its manifest digest.
    digest = json.loads(subprocess.run(["tar", "-xOf", str(archive), "index.json"], capture_output=True,
                                       check=True, timeout=60).stdout)["manifests"][0]["digest"]
    listed = [line.split() for line in node.ctr("images", "ls").stdout.splitlines()[1:]]
    (imported, *_) = [cols[0] for cols in listed if digest in cols] or [None]
    assert imported, (digest, listed)
    tag = node.ctr("images", "tag", "--force", imported, "docker.io/library/aiadmit:dockerfile")
    assert tag.returncode == 0, tag.stderr
    started = time.monotonic()
    installed.run_helm("upgrade", installs.RELEASE, str(installs.CHART), "--reuse-values", "--set",
                       "image.tag=dockerfile")
    rollout = node.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/aiadmit", "--timeout=180s",
                           timeout=200, check=False)
    if rollout.returncode != 0:
        pods = node.kubectl("-n", NAMESPACE, "describe", "pods", check=False).stdout[-5000:]
        logs = node.kubectl("-n", NAMESPACE, "logs", "-l", "app.kubernetes.io/name=aiadmit", "--tail=30",
                            "--all-containers", "--prefix", check=False)
        pytest.fail(f"rollout of the Dockerfile's image: {rollout.stderr}\n--- pods\n{pods}\n--- logs\n"
                    f"{logs.stdout[-4000:]}{logs.stderr[-1000:]}", pytrace=False)
    wait_for("2 ready replicas of the Dockerfile's image", lambda: ready_replicas(node) == 2 and all(
        p["status"]["containerStatuses"][0]["image"] == "docker.io/library/aiadmit:dockerfile"
        for p in webhook_pods(node)) and len(webhook_pods(node)) == 2, 120, 1)
    rolled = time.monotonic() - started

    def old_pods_gone() -> bool:
        out = node.kubectl("-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=aiadmit", "-o", "json")
        return len(json.loads(out.stdout)["items"]) == 2

    # Once, right after `rollout status` returned while the old pods were still stopping, the first create was
    # rejected with "connection reset by peer" (the API server's kept-alive connection to an old pod): checked
    # here once they are gone; docs/operations.md, "Upgrade", records it.
    wait_for("the old replicas to be gone", old_pods_gone, 90, 1)
    status, message, _ = dry_run(api, gpu_pod("df-deny", gpu_namespace, requests=False))
    assert status == 403 and DENIED in message and "resources-declared" in message, message
    status, message, pod = dry_run(api, gpu_pod("df-allow", gpu_namespace))
    assert status == 201 and has_dshm(pod), message
    print(f"Dockerfile image rolled out by helm upgrade in {rolled:.1f} s; denied and mutated as before")
