"""Admission through a real kube-apiserver: aiadmit registered from manifests/base, called by the API server.

Every scenario goes through the API server's admission chain (built-in plugins, then our mutating webhook, CRD
pruning, then our validating webhook), driven with `kubectl` and, where an API client is what users would use, the
Python client. The webhook process, its arguments and both webhook configurations come from manifests/base
(tests/e2e/webhooks.py); only the URL differs. README.md ("Admission scenarios") says what each test shows and what
this control plane cannot show.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from webhooks import aiadmit_cli, established_peers, wait_until

pytestmark = pytest.mark.e2e

VALIDATE, MUTATE = "validate.aiadmit.dev", "mutate.aiadmit.dev"
DENIED = f'admission webhook "{VALIDATE}" denied the request'
ENFORCEMENT = "aiadmit.dev/enforcement"
UNPINNED = "registry.example/train:1.0"
IMAGE = "registry.example/debug@sha256:" + "0" * 64  # pinned: image-digest has nothing to say
# The default params of policies/priority-class.yaml: bare GPU pods ("other") may use ai-batch, training jobs
# ai-training or ai-training-preemptible (the default the mutation sets). Created once for the module; the
# priority-class test creates ai-training itself, to see it arrive live.
SESSION_CLASSES = {"ai-batch": 1000, "ai-training-preemptible": 500}
LIVE_CLASS = "ai-training"
PROBE_NAMESPACE = "aiadmit-e2e-probe"


# ---------------------------------------------------------------------------------------------------- objects
def gpu_container(name="train", requests=True, image=UNPINNED) -> dict:
    resources = {"limits": {"nvidia.com/gpu": "1", "memory": "8Gi"}}
    if requests:
        resources["requests"] = {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "10Gi"}
    else:
        resources["limits"] = {"nvidia.com/gpu": "1"}
    return {"name": name, "image": image, "resources": resources}


def gpu_pod(name: str, namespace: str, requests=True, priority_class="ai-batch", owner=None) -> dict:
    """A bare GPU pod. With requests and a class it passes every deny-level policy once mutated (/dev/shm) and
    gets one warning: image-digest (the tag is not a digest)."""
    spec = {"containers": [gpu_container(requests=requests)]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pytorchjob(name: str, namespace: str, priority_class=None) -> dict:
    """A one-replica GPU PyTorchJob without /dev/shm (mutated) and, unless given, without a class (mutated)."""
    spec = {"containers": [gpu_container(name="pytorch")]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "OnFailure",
                                                        "template": {"spec": spec}}}}}


def old_deployment(name: str, namespace: str, replicas=1) -> dict:
    """A GPU serving Deployment that fails several deny-level policies (no requests, no probes, no class)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [gpu_container(name="server", requests=False)]}}}}


def dump(*objects: dict) -> str:
    return yaml.safe_dump_all(objects)


# ---------------------------------------------------------------------------------------------------- helpers
def kubectl_apply(apiserver, *objects: dict, extra=()):
    """`kubectl apply -f -` without raising: the CompletedProcess (stdout, stderr with kubectl's Warning: lines)."""
    return apiserver.kubectl("apply", *extra, "-f", "-", input=dump(*objects), check=False)


def stored(apiserver, kind: str, name: str, namespace: str):
    """The object as `kubectl get -o yaml` shows it, or None when it does not exist."""
    p = apiserver.kubectl("get", kind, name, "-n", namespace, "-o", "yaml", "--ignore-not-found", check=False)
    assert p.returncode == 0, p.stderr
    return yaml.safe_load(p.stdout) if p.stdout.strip() else None


def warnings_of(stderr: str) -> list[str]:
    return [line[len("Warning: "):] for line in stderr.splitlines() if line.startswith("Warning: ")]


def create_namespace(apiserver, prefix: str, labels: dict | None = None) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(apiserver.api_client).create_namespace({"metadata": {"name": name, "labels": labels or {}}})
    return name


def add_gpu_quota(apiserver, namespace: str, gpus: int = 8, with_status: bool = True) -> None:
    """A ResourceQuota bounding requests.nvidia.com/gpu. There is no quota controller here, so with_status writes
    the status it would write on its first sync (hard copied, nothing used): the ResourceQuota admission plugin
    then enforces and charges the quota for pods exactly as in a cluster."""
    core = client.CoreV1Api(apiserver.api_client)
    hard = {"requests.nvidia.com/gpu": str(gpus)}
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "gpus"}, "spec": {"hard": hard}})
    if with_status:
        core.patch_namespaced_resource_quota_status("gpus", namespace, {
            "status": {"hard": hard, "used": {"requests.nvidia.com/gpu": "0"}}})


def dry_run_pod(apiserver, body: dict) -> tuple[int, str, list[str]]:
    """Create `body` with dryRun=All through the Python client: (HTTP status, message or '', warnings)."""
    core = client.CoreV1Api(apiserver.api_client)
    try:
        _, status, headers = core.create_namespaced_pod_with_http_info(body["metadata"]["namespace"], body,
                                                                       dry_run="All")
        return status, "", header_warnings(headers)
    except ApiException as exc:
        return exc.status, json.loads(exc.body).get("message", exc.body) if exc.body else str(exc), []


def header_warnings(headers) -> list[str]:
    """The Warning headers (RFC 7234: `299 - "text"`) of a response, as texts."""
    values = headers.get("Warning") if hasattr(headers, "get") else None
    if not values:
        return []
    out = []
    for value in values.split(", 299 ") if isinstance(values, str) else values:
        value = value.strip()
        value = value[len("299 "):] if value.startswith("299 ") else value
        value = value[len("- "):] if value.startswith("- ") else value
        out.append(value.strip().strip('"'))
    return out


def sees(check, what: str, timeout: float = 30.0):
    """The webhook's live facts arrive by watch: poll an admission outcome until it is the expected one."""
    return wait_until(check, timeout, what, interval=0.25)


def webhook_denies(apiserver, namespace: str) -> bool:
    status, message, _ = dry_run_pod(apiserver, gpu_pod(f"probe-{uuid.uuid4().hex[:5]}", namespace, requests=False))
    return status == 403 and DENIED in message and "resources-declared" in message


def webhook_admits_unrequested(apiserver, namespace: str, warned: bool = True) -> bool:
    """A GPU pod without requests is admitted (a namespace in warn or audit mode), with or without a warning."""
    status, _, warnings = dry_run_pod(apiserver, gpu_pod(f"probe-{uuid.uuid4().hex[:5]}", namespace, requests=False))
    return status == 201 and any(w.startswith("resources-declared: ") for w in warnings) == warned


def quota_known(apiserver, namespace: str) -> bool:
    status, message, _ = dry_run_pod(apiserver, gpu_pod(f"probe-{uuid.uuid4().hex[:5]}", namespace))
    return status == 201 or "gpu-quota" not in message


# ---------------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def webhook(apiserver, aiadmit_server):
    """aiadmit registered with the API server for this module; waits until the API server really calls both
    webhooks, and unregisters at the end so that other modules' objects are not judged."""
    scheduling = client.SchedulingV1Api(apiserver.api_client)
    for name, value in SESSION_CLASSES.items():
        try:
            scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
        except ApiException as exc:
            if exc.status != 409:
                raise
    core = client.CoreV1Api(apiserver.api_client)
    try:
        core.create_namespace({"metadata": {"name": PROBE_NAMESPACE}})
        add_gpu_quota(apiserver, PROBE_NAMESPACE)
    except ApiException as exc:
        if exc.status != 409:
            raise
    started = time.monotonic()
    aiadmit_server.register()
    try:
        wait_until(lambda: webhook_denies(apiserver, PROBE_NAMESPACE), 60, "the API server to call /validate")
        wait_until(lambda: mutated_probe(apiserver), 60, "the API server to call /mutate")
        wait_until(lambda: quota_known(apiserver, PROBE_NAMESPACE), 60, "the webhook to see the probe quota")
        aiadmit_server.registered_after = time.monotonic() - started
        yield aiadmit_server
    finally:
        aiadmit_server.unregister()


def mutated_probe(apiserver) -> bool:
    core = client.CoreV1Api(apiserver.api_client)
    body = gpu_pod(f"probe-{uuid.uuid4().hex[:5]}", PROBE_NAMESPACE)
    try:
        pod = core.create_namespaced_pod(PROBE_NAMESPACE, body, dry_run="All")
    except ApiException:
        return False
    return any(v.name == "dshm" for v in pod.spec.volumes or [])


@pytest.fixture
def gpu_namespace(apiserver, webhook):
    """A fresh namespace with an enforced GPU quota that the webhook has already seen."""
    namespace = create_namespace(apiserver, "gpu")
    add_gpu_quota(apiserver, namespace)
    sees(lambda: quota_known(apiserver, namespace), f"the webhook to see the quota of {namespace}")
    return namespace


@pytest.fixture(scope="module")
def warn_namespace(apiserver, webhook):
    """A namespace labelled aiadmit.dev/enforcement=warn, holding a GPU pod without requests and an old-style
    Deployment, both admitted with warnings: (namespace, {name: kubectl apply result})."""
    namespace = create_namespace(apiserver, "warn", {ENFORCEMENT: "warn"})
    add_gpu_quota(apiserver, namespace)
    sees(lambda: webhook_admits_unrequested(apiserver, namespace), "the webhook to see the warn label")
    results = {
        "pod": kubectl_apply(apiserver, gpu_pod("no-requests", namespace, requests=False)),
        "deployment": kubectl_apply(apiserver, old_deployment("legacy-serve", namespace)),
    }
    return namespace, results


# ---------------------------------------------------------------------------------------------------- scenarios
def test_registration_comes_from_the_manifests(apiserver, webhook):
    """What the API server holds is manifests/base's configurations, only pointed at the local URL."""
    rendered = {c["kind"]: c for c in webhook.configurations()}
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        live = apiserver.kubectl_json("get", kind, "aiadmit")
        want = rendered[kind]["webhooks"][0]
        got = live["webhooks"][0]
        for field in ("name", "failurePolicy", "timeoutSeconds", "matchPolicy", "sideEffects", "rules",
                      "namespaceSelector", "clientConfig"):
            assert got[field] == want[field], field
    assert live["webhooks"][0]["reinvocationPolicy"] == "IfNeeded"  # the mutating one, listed last
    assert rendered["ValidatingWebhookConfiguration"]["webhooks"][0]["clientConfig"]["url"] == webhook.url + "/validate"
    assert rendered["MutatingWebhookConfiguration"]["webhooks"][0]["clientConfig"]["url"] == webhook.url + "/mutate"
    print(f"webhook answering {webhook.registered_after:.1f}s after registration")


def test_gpu_pod_without_requests_is_denied_naming_the_policy(apiserver, gpu_namespace):
    pod = gpu_pod("no-requests", gpu_namespace, requests=False)
    p = kubectl_apply(apiserver, pod)
    assert p.returncode == 1
    assert DENIED in p.stderr
    assert f"aiadmit denied Pod {gpu_namespace}/no-requests" in p.stderr
    assert "\nresources-declared: " in p.stderr and "(resources.requests.cpu; a limit alone counts too" in p.stderr
    assert stored(apiserver, "pod", "no-requests", gpu_namespace) is None

    # The Python client gets the same answer: 403 Forbidden with the policy in the Status message.
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(apiserver.api_client).create_namespaced_pod(gpu_namespace, pod)
    assert denied.value.status == 403
    status = json.loads(denied.value.body)
    assert status["reason"] == "Forbidden" and DENIED in status["message"]
    assert "resources-declared: " in status["message"]


def test_warning_is_shown_and_the_object_created(apiserver, gpu_namespace):
    p = kubectl_apply(apiserver, gpu_pod("unpinned", gpu_namespace))
    assert p.returncode == 0, p.stderr
    assert "pod/unpinned created" in p.stdout
    warnings = warnings_of(p.stderr)
    assert any(w.startswith("image-digest: ") and UNPINNED in w for w in warnings), p.stderr
    assert stored(apiserver, "pod", "unpinned", gpu_namespace) is not None
    # The ResourceQuota plugin ran after our webhooks and charged the pod's GPU to the quota.
    quota = client.CoreV1Api(apiserver.api_client).read_namespaced_resource_quota("gpus", gpu_namespace)
    assert quota.status.used["requests.nvidia.com/gpu"] == "1"

    # The Python client: created (201) and the warning is in the response's Warning header.
    _, status, headers = client.CoreV1Api(apiserver.api_client).create_namespaced_pod_with_http_info(
        gpu_namespace, gpu_pod("unpinned-2", gpu_namespace))
    assert status == 201
    assert any(w.startswith("image-digest: ") for w in header_warnings(headers)), headers


def test_mutation_is_stored_for_a_pod_and_a_pytorchjob(apiserver, gpu_namespace):
    p = kubectl_apply(apiserver, gpu_pod("mutated", gpu_namespace), pytorchjob("ft", gpu_namespace))
    assert p.returncode == 0, p.stderr

    pod = stored(apiserver, "pod", "mutated", gpu_namespace)
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in pod["spec"]["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in pod["spec"]["containers"][0]["volumeMounts"]

    # A custom resource: the CRD's structural schema prunes unknown fields silently, so a stored field proves
    # the patch is inside the schema (kubectl get shows what etcd holds).
    job = stored(apiserver, "pytorchjob", "ft", gpu_namespace)
    spec = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in spec["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in spec["containers"][0]["volumeMounts"]
    assert spec["priorityClassName"] == "ai-training-preemptible"  # the training default, which exists


def test_server_dry_run_gives_the_same_verdict_and_stores_nothing(apiserver, gpu_namespace):
    dry = ("--dry-run=server",)
    denied = kubectl_apply(apiserver, gpu_pod("dry-denied", gpu_namespace, requests=False), extra=dry)
    assert denied.returncode == 1 and DENIED in denied.stderr and "resources-declared: " in denied.stderr

    admitted = apiserver.kubectl("apply", "--dry-run=server", "-o", "yaml", "-f", "-",
                                 input=dump(gpu_pod("dry-admitted", gpu_namespace)), check=False)
    assert admitted.returncode == 0, admitted.stderr
    assert any(w.startswith("image-digest: ") for w in warnings_of(admitted.stderr))
    assert any(v["name"] == "dshm" for v in yaml.safe_load(admitted.stdout)["spec"]["volumes"])  # mutated too

    for name in ("dry-denied", "dry-admitted"):
        assert stored(apiserver, "pod", name, gpu_namespace) is None
    quota = client.CoreV1Api(apiserver.api_client).read_namespaced_resource_quota("gpus", gpu_namespace)
    assert quota.status.used["requests.nvidia.com/gpu"] == "0"


def test_updating_an_old_noncompliant_deployment_is_admitted_with_a_warning(apiserver, webhook):
    """The Deployment is created while its namespace is in audit mode (as when a namespace is onboarded), then
    the namespace is switched to enforcement: scaling it must keep working, a new violation must not."""
    namespace = create_namespace(apiserver, "legacy", {ENFORCEMENT: "audit"})
    add_gpu_quota(apiserver, namespace)
    sees(lambda: webhook_admits_unrequested(apiserver, namespace, warned=False), "the webhook to see the audit label")
    created = kubectl_apply(apiserver, old_deployment("legacy", namespace))
    assert created.returncode == 0, created.stderr
    assert not any(w.startswith("resources-declared") for w in warnings_of(created.stderr))  # audit: silent

    apiserver.kubectl("label", "namespace", namespace, f"{ENFORCEMENT}-")
    sees(lambda: webhook_denies(apiserver, namespace), "the webhook to see the label removed")
    assert DENIED in kubectl_apply(apiserver, old_deployment("legacy-new", namespace)).stderr  # a new one: denied

    scaled = apiserver.kubectl("patch", "deployment", "legacy", "-n", namespace, "--type=merge",
                               "-p", '{"spec": {"replicas": 3}}', check=False)
    assert scaled.returncode == 0, scaled.stderr
    warnings = warnings_of(scaled.stderr)
    assert any(w.startswith("resources-declared: (already present before this update)") for w in warnings), \
        scaled.stderr
    assert stored(apiserver, "deployment", "legacy", namespace)["spec"]["replicas"] == 3

    # A new violation in the same update is still denied.
    broken = old_deployment("legacy", namespace, replicas=3)
    broken["spec"]["template"]["spec"]["containers"].append(gpu_container(name="sidecar", requests=False))
    worse = kubectl_apply(apiserver, broken)
    assert worse.returncode == 1 and DENIED in worse.stderr and "resources-declared: " in worse.stderr


def test_warn_namespace_admits_what_is_denied_elsewhere(apiserver, warn_namespace, gpu_namespace):
    namespace, results = warn_namespace
    pod = results["pod"]
    assert pod.returncode == 0, pod.stderr
    assert "pod/no-requests created" in pod.stdout
    assert any(w.startswith("resources-declared: ") for w in warnings_of(pod.stderr)), pod.stderr
    assert stored(apiserver, "pod", "no-requests", namespace) is not None
    deployment = results["deployment"]
    assert deployment.returncode == 0, deployment.stderr
    assert {w.split(":")[0] for w in warnings_of(deployment.stderr)} >= {"resources-declared", "semantic-readiness"}

    elsewhere = kubectl_apply(apiserver, gpu_pod("no-requests", gpu_namespace, requests=False))
    assert elsewhere.returncode == 1 and DENIED in elsewhere.stderr


def test_gpu_quota_reads_live_resource_quotas(apiserver, webhook):
    """gpu-quota on a PyTorchJob: the ResourceQuota plugin charges only pods, so this needs no quota status."""
    namespace = create_namespace(apiserver, "quota")
    job = pytorchjob("quota-job", namespace)
    denied = kubectl_apply(apiserver, job)
    assert denied.returncode == 1 and DENIED in denied.stderr
    assert "gpu-quota: " in denied.stderr and f"no ResourceQuota in namespace {namespace} bounds" in denied.stderr

    add_gpu_quota(apiserver, namespace, with_status=False)
    admitted = sees(lambda: (lambda p: p if p.returncode == 0 else None)(kubectl_apply(apiserver, job)),
                    "the webhook to see the new ResourceQuota")
    assert "pytorchjob.kubeflow.org/quota-job created" in admitted.stdout
    assert not any(w.startswith("gpu-quota") for w in warnings_of(admitted.stderr))


def test_priority_class_reads_live_priority_classes(apiserver, gpu_namespace):
    scheduling = client.SchedulingV1Api(apiserver.api_client)
    try:  # left by an earlier session on a reused control plane: start from "it does not exist"
        scheduling.delete_priority_class(LIVE_CLASS)
    except ApiException as exc:
        assert exc.status == 404
    job = pytorchjob("classy", gpu_namespace, priority_class=LIVE_CLASS)
    denied = sees(lambda: (lambda p: p if p.returncode == 1 else None)(kubectl_apply(apiserver, job)),
                  f"the webhook to see {LIVE_CLASS} absent")
    assert DENIED in denied.stderr
    assert f"priorityClassName {LIVE_CLASS}, which is not a PriorityClass of this cluster" in denied.stderr

    scheduling.create_priority_class({"metadata": {"name": LIVE_CLASS}, "value": 2000})
    admitted = sees(lambda: (lambda p: p if p.returncode == 0 else None)(kubectl_apply(apiserver, job)),
                    f"the webhook to see PriorityClass {LIVE_CLASS}")
    assert "pytorchjob.kubeflow.org/classy created" in admitted.stdout


def test_controller_pod_of_a_template_without_class_is_admitted(apiserver, gpu_namespace):
    """Pods that the ReplicaSet controller creates from an old template without priorityClassName.

    Our deny findings are lowered to warnings for a trusted controller (docs/webhook.md), and the Priority
    plugin must not reject the pod either: it resolves the class before the mutating webhooks run, and runs
    again after any webhook changed the pod, so a class added to a Pod by a webhook meets the priority (0) it
    already set and the API server rejects the pod."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "old-rs", "uid": str(uuid.uuid4()),
             "controller": True}
    pod = gpu_pod("old-rs-x7k2p", gpu_namespace, requests=False, priority_class=None, owner=owner)
    p = apiserver.kubectl("create", "--as=system:serviceaccount:kube-system:replicaset-controller", "-f", "-",
                          input=dump(pod), check=False)
    assert p.returncode == 0, p.stderr
    warnings = warnings_of(p.stderr)
    assert any(w.startswith("resources-declared: (owner admitted by its controller)") for w in warnings), p.stderr
    assert any(w.startswith("priority-class: (owner admitted by its controller)") for w in warnings), p.stderr
    assert "priorityClassName" not in stored(apiserver, "pod", "old-rs-x7k2p", gpu_namespace)["spec"]


def test_failure_policies_when_the_webhook_is_down(apiserver, webhook, gpu_namespace):
    """validating Fail: rejected with the API server's own error. mutating Ignore: the request went past the
    mutating phase (the error names only the validating webhook) and the API server logged that it failed open."""
    assert webhook.stop() == 0  # graceful SIGTERM
    try:
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", webhook.port)) != 0  # nothing listens
        p = kubectl_apply(apiserver, gpu_pod("while-down", gpu_namespace))
        assert p.returncode == 1
        assert f'failed calling webhook "{VALIDATE}"' in p.stderr, p.stderr
        assert "connection refused" in p.stderr
        assert MUTATE not in p.stderr
        assert stored(apiserver, "pod", "while-down", gpu_namespace) is None
        log = apiserver.logs["kube-apiserver"].read_text(errors="replace")
        assert f"Failed calling webhook, failing open {MUTATE}" in log
        # Kinds outside the rules are never sent: a Secret is created while no replica answers. ConfigMaps are
        # validated (a device variable in one reaches pods: docs/security.md, invariant e), so they fail closed too.
        apiserver.kubectl("create", "secret", "generic", "unaffected", "-n", gpu_namespace)
        refused = apiserver.kubectl("create", "configmap", "refused", "-n", gpu_namespace, check=False)
        assert refused.returncode == 1 and f'failed calling webhook "{VALIDATE}"' in refused.stderr, refused.stderr
    finally:
        webhook.start()
    sees(lambda: webhook_denies(apiserver, gpu_namespace), "the restarted webhook to be called")
    assert kubectl_apply(apiserver, gpu_pod("after-restart", gpu_namespace)).returncode == 0


def test_certificate_rotation_loses_no_request(apiserver, webhook, gpu_namespace):
    """`aiadmit certs rotate` rewrites tls.crt/tls.key (same CA, so the caBundle stays) while four clients keep
    sending creates through the API server; every one must get our webhook's answer, and so must the requests the
    API server sends on connections it opens once the new certificate is served (their handshake is the one that
    meets it).

    When the API server opens a connection, as read in k8s.io/apiserver v0.37.2: `ClientManager.hookClientConfig`
    (pkg/util/webhook/client.go) gives a webhook registered by `url`, as this one (loopback), a plain rest.Config;
    WebhookRoundTripLoadBalancing (beta, on in 1.37) is consulted only in its `cc.Service != nil` branch, where it
    wraps the transport in `resolvingRoundTripper` (the Service's endpoint resolved per request, connections kept
    per endpoint), so it does not apply here. `rest.UnversionedRESTClientFor` then takes client-go's shared
    transport (k8s.io/client-go v0.37.2, transport/cache.go, `tlsTransportCache.get`: `MaxIdleConnsPerHost` 25,
    HTTP/1.1 since this server offers no h2), which dials only when no connection it holds is idle. So a burst of
    four more clients may run entirely on connections made before the switch (the 1-in-3 failure on 1.34: no new
    connection within 8 s). What ends a held connection is the server: `Connection: close` after its
    `--keepalive-requests`-th request, or closing it after `--keepalive-timeout` seconds idle. The test follows
    that: the clients run until a connection made after the switch is seen, for at most 15 s or (connections held
    at the switch) x keepalive-requests webhook calls; if none came, the clients pause until the server has closed
    every connection held at the switch for idleness (bounded by the keep-alive time-out + 15 s), and the API
    server must dial for the next request: no new connection within 15 s of the clients resuming fails, naming
    which step did not happen. (Twelve clients on the two cores once starved one request past the 5 s webhook
    timeout while other suites ran: a CPU stall, not a lost certificate; eight keep the test about rotation.)"""
    old_cert = webhook.served_certificate()
    outcomes: list[tuple[float, int, str]] = []
    stop, burst, paused = threading.Event(), threading.Event(), threading.Event()

    def client_loop(index: int) -> None:
        api = apiserver.new_api_client()
        try:
            while not stop.is_set():
                if paused.is_set() or (index >= 4 and not burst.is_set()):
                    time.sleep(0.05)
                    continue
                pod = gpu_pod(f"rot-{index}-{uuid.uuid4().hex[:5]}", gpu_namespace, requests=False)
                try:
                    client.CoreV1Api(api).create_namespaced_pod(gpu_namespace, pod, dry_run="All")
                    outcomes.append((time.monotonic(), 201, "admitted"))
                except ApiException as exc:
                    try:
                        message = json.loads(exc.body)["message"]
                    except (TypeError, ValueError, KeyError):
                        message = str(exc.body)
                    outcomes.append((time.monotonic(), exc.status, message))
                except Exception as exc:  # a client-side error is a lost request too
                    outcomes.append((time.monotonic(), 0, repr(exc)))
        finally:
            api.close()

    def calls_since(t: float) -> int:  # a Pod create calls /mutate and /validate: two webhook calls each
        return 2 * sum(1 for o in list(outcomes) if o[0] >= t)

    def new_connection_within(seconds: float, calls: float = float("inf"), since: float = 0.0) -> set:
        deadline, seen = time.monotonic() + seconds, set()
        while not seen and time.monotonic() < deadline and calls_since(since) <= calls:
            time.sleep(0.2)
            seen = established_peers(webhook.port) - before_peers
        return seen

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    forced = ""
    try:
        time.sleep(2)
        rotated_at = time.monotonic()
        new_cert = webhook.rotate_certificate()
        assert new_cert != old_cert
        wait_until(lambda: webhook.served_certificate() == new_cert, 30, "the server to serve the new certificate")
        switched_at = time.monotonic()
        before_peers = established_peers(webhook.port)
        time.sleep(1)
        burst.set()  # four more clients: the API server may need more connections than it has
        per_connection, idle_limit = webhook.keepalive_requests(), webhook.keepalive_timeout()
        bound = len(before_peers) * per_connection
        new_connections = new_connection_within(15, bound, switched_at)
        if not new_connections:
            paused.set()
            paused_at, calls_before_pause = time.monotonic(), calls_since(switched_at)
            try:
                wait_until(lambda: not established_peers(webhook.port) & before_peers, idle_limit + 15,
                           "the server to close the connections held at the switch")
            except AssertionError:
                raise AssertionError(
                    f"no new connection in {calls_before_pause} webhook calls after the switch, and with the clients "
                    f"paused for {time.monotonic() - paused_at:.0f} s the server did not close the idle "
                    f"connection(s) {sorted(established_peers(webhook.port) & before_peers)} after its "
                    f"--keepalive-timeout of {idle_limit:.0f} s") from None
            closed_in = time.monotonic() - paused_at
            resumed_at = time.monotonic()
            paused.clear()
            new_connections = new_connection_within(15)
            forced = (f" after a pause: none in {calls_before_pause} calls, the server closed the {len(before_peers)} "
                      f"held at the switch {closed_in:.0f} s into the pause, the API server dialled "
                      f"{time.monotonic() - resumed_at:.1f} s after the clients resumed")
            assert new_connections, (
                f"the API server opened no new connection within 15 s of requests after the server had closed every "
                f"connection it held at the switch ({len(before_peers)}; {calls_since(resumed_at)} webhook calls "
                f"since the clients resumed)")
        calls_after = calls_since(switched_at)
    finally:
        stop.set()
        for t in threads:
            t.join(30)

    lost = [(round(t - rotated_at, 2), status, message) for t, status, message in outcomes
            if not (status == 403 and DENIED in message and "resources-declared" in message)]
    assert not lost, f"{len(lost)} of {len(outcomes)} requests not answered by the webhook (seconds after the " \
                     f"rotate command, status, message; new certificate served at " \
                     f"{switched_at - rotated_at:.2f}s): {lost[:5]}"
    during = [o for o in outcomes if rotated_at <= o[0]]
    after_switch = [o for o in outcomes if o[0] >= switched_at]
    assert len(during) >= 20 and len(after_switch) >= 20, (len(outcomes), len(during), len(after_switch))

    def reloaded():
        return re.search(r'aiadmit_certificate_reloads_total\{outcome="success"\} ([0-9.]+)', webhook.server.metrics())

    try:
        reloads = wait_until(reloaded, 10, "a worker's certificate reload in /metrics")
    except AssertionError:
        lines = [line for line in webhook.server.metrics().splitlines() if "certificate" in line]
        logs = [line for line in webhook.server.logs().splitlines() if "certificate" in line]
        raise AssertionError(f"no worker reloaded the certificate: metrics {lines}; logs {logs[-6:]}") from None
    print(f"rotation: workers reloaded the certificate {float(reloads.group(1)):.0f} time(s); ", end="")
    print(f"rotation: {len(outcomes)} requests, {len(during)} after the rotate command, "
          f"{len(after_switch)} after the new certificate was served "
          f"({switched_at - rotated_at:.1f}s after rotating), {len(new_connections)} new API server connections "
          f"({len(before_peers)} held at the switch, {calls_after} webhook calls after it){forced}")


def test_cluster_audit_reports_the_objects_admitted_under_warn(apiserver, warn_namespace):
    namespace, _ = warn_namespace
    p = aiadmit_cli("audit", "--cluster", "--kubeconfig", str(apiserver.kubeconfig), "-n", namespace,
                    "--format", "json", "--fail-on", "never", check=False)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    found = {(f["resource"]["kind"], f["resource"]["name"], f["policy"], f["action"]) for f in report["findings"]
             if f["result"] == "fail"}
    assert ("Pod", "no-requests", "resources-declared", "warn") in found, found
    assert ("Deployment", "legacy-serve", "resources-declared", "warn") in found, found
    assert ("Deployment", "legacy-serve", "semantic-readiness", "warn") in found, found
    assert all(f["resource"]["namespace"] == namespace for f in report["findings"])


def test_kubectl_debug_cannot_add_a_privileged_container_to_an_untrusted_pod(apiserver, webhook):
    """Issue 12: the ephemeralcontainers subresource was never sent, so a privileged debug container could be added
    to any pod. The pod is created before its namespace turns untrusted (it would be denied after); its own
    violations then count as already present, and only what the debug container brings is judged."""
    core = client.CoreV1Api(apiserver.api_client)
    namespace = create_namespace(apiserver, "debug")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "target", "namespace": namespace},
           "spec": {"containers": [{"name": "app", "image": IMAGE, "resources": {
               "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}, "limits": {"memory": "1Gi"}}}]}}
    core.create_namespaced_pod(namespace, pod)
    core.patch_namespace(namespace, {"metadata": {"labels": {"aiadmit.dev/tier": "untrusted"}}})
    privileged = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": namespace},
                  "spec": {"containers": [{"name": "p", "image": IMAGE, "securityContext": {"privileged": True}}]}}

    def untrusted_seen() -> bool:
        try:
            core.create_namespaced_pod(namespace, privileged, dry_run="All")
        except ApiException as exc:
            return "untrusted-hardening" in (exc.body or "")
        return False

    sees(untrusted_seen, f"the webhook to see {namespace} as untrusted")
    current = core.read_namespaced_pod("target", namespace)
    current.spec.ephemeral_containers = [client.V1EphemeralContainer(
        name="debug", image=IMAGE, security_context=client.V1SecurityContext(privileged=True))]
    with pytest.raises(ApiException) as denied:
        core.replace_namespaced_pod_ephemeralcontainers("target", namespace, current)
    assert denied.value.status == 403 and "untrusted-hardening" in denied.value.body
    assert "debug" in denied.value.body
    assert not core.read_namespaced_pod("target", namespace).spec.ephemeral_containers

    current = core.read_namespaced_pod("target", namespace)
    current.spec.ephemeral_containers = [client.V1EphemeralContainer(
        name="careful", image=IMAGE, security_context=client.V1SecurityContext(
            privileged=False, allow_privilege_escalation=False, run_as_non_root=True,
            capabilities=client.V1Capabilities(drop=["ALL"]),
            seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault")))]
    core.replace_namespaced_pod_ephemeralcontainers("target", namespace, current)
    assert [c.name for c in core.read_namespaced_pod("target", namespace).spec.ephemeral_containers] == ["careful"]


def test_a_resize_that_breaks_the_checklist_is_refused_one_that_keeps_it_passes(apiserver, gpu_namespace):
    """Issue 22: in-place resize (pods/resize, GA in 1.35) was never sent to the webhook, so a resize could take a
    GPU pod's memory below its /dev/shm unchecked. The pod gets its 2Gi /dev/shm from the mutation (a quarter of
    8Gi); a resize to 1Gi of memory is refused by shm-sized, one to 4 cpu is admitted and stored."""
    core = client.CoreV1Api(apiserver.api_client)
    p = kubectl_apply(apiserver, gpu_pod("resized", gpu_namespace))
    assert p.returncode == 0, p.stderr
    pod = stored(apiserver, "pod", "resized", gpu_namespace)
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in pod["spec"]["volumes"]

    shrink = {"spec": {"containers": [{"name": "train", "resources": {
        "requests": {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "10Gi"},
        "limits": {"nvidia.com/gpu": "1", "memory": "1Gi"}}}]}}
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_pod_resize("resized", gpu_namespace, shrink)
    assert refused.value.status == 403, refused.value.body
    message = json.loads(refused.value.body)["message"]
    assert message.startswith(DENIED) and "\nshm-sized: /dev/shm of container train (sizeLimit 2Gi) must be smaller " \
        "than its memory limit 1Gi" in message, message
    assert stored(apiserver, "pod", "resized", gpu_namespace)["spec"]["containers"][0]["resources"]["limits"][
        "memory"] == "8Gi"

    grow = {"spec": {"containers": [{"name": "train", "resources": {"requests": {"cpu": "4"}}}]}}
    core.patch_namespaced_pod_resize("resized", gpu_namespace, grow)
    assert stored(apiserver, "pod", "resized", gpu_namespace)["spec"]["containers"][0]["resources"]["requests"][
        "cpu"] == "4"


def dra_request(name="gpu", device_class="gpu.nvidia.com", **exactly) -> dict:
    return {"name": name, "exactly": {"deviceClassName": device_class, **exactly}}


def claim(name: str, namespace: str, requests: list, config: list | None = None) -> dict:
    devices = {"requests": requests, **({"config": config} if config else {})}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"devices": devices}}


def claim_template(name: str, namespace: str, requests: list) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"spec": {"devices": {"requests": requests}}}}


TIME_SLICED = [{"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}}}]


def test_dra_claims_that_break_a_rule_are_denied_and_good_ones_created(apiserver, webhook):
    """Issue 22: ResourceClaims and ResourceClaimTemplates are admission targets (manifests/base's rules). In an
    untrusted tenant namespace a template asking for admin access, and a claim whose driver config time-slices its
    GPU, are denied by dra-claims with its messages; a template of one whole GPU per pod and a claim without a
    sharing config are stored. The namespace carries resource.kubernetes.io/admin-access, the label Kubernetes
    requires of a namespace for admin access (DRAAdminAccess), so that the denial tested is aiadmit's."""
    namespace = create_namespace(apiserver, "dra", {"aiadmit.dev/tier": "untrusted",
                                                    "resource.kubernetes.io/admin-access": "true"})
    resources = client.ResourceV1Api(apiserver.api_client)
    sliced = claim("time-sliced", namespace, [dra_request()], TIME_SLICED)

    def untrusted_seen() -> bool:
        try:
            resources.create_namespaced_resource_claim(namespace, sliced, dry_run="All")
        except ApiException as exc:
            return "untrusted-shared-device" in (exc.body or "") or "shares a GPU" in (exc.body or "")
        return False

    sees(untrusted_seen, f"the webhook to see {namespace} as untrusted")
    with pytest.raises(ApiException) as denied:
        resources.create_namespaced_resource_claim(namespace, sliced)
    message = json.loads(denied.value.body)["message"]
    assert denied.value.status == 403 and message.startswith(DENIED), message
    assert f"\ndra-claims: ResourceClaim time-sliced in an untrusted namespace shares a GPU (request gpu: sharing " \
           f"TimeSlicing)" in message, message

    admin = claim_template("admin-gpus", namespace, [dra_request("all", adminAccess=True, allocationMode="All")])
    p = kubectl_apply(apiserver, admin)
    assert p.returncode == 1 and DENIED in p.stderr, p.stderr
    assert "dra-claims: ResourceClaimTemplate admin-gpus asks for adminAccess (request all)" in p.stderr, p.stderr
    for kind, name in (("resourceclaim", "time-sliced"), ("resourceclaimtemplate", "admin-gpus")):
        assert stored(apiserver, kind, name, namespace) is None

    good = kubectl_apply(apiserver, claim_template("one-gpu", namespace, [dra_request()]),
                         claim("one-gpu", namespace, [dra_request()]))
    assert good.returncode == 0, good.stderr
    assert not any(w.startswith("dra-claims") for w in warnings_of(good.stderr)), good.stderr
    assert stored(apiserver, "resourceclaimtemplate", "one-gpu", namespace) is not None
    assert stored(apiserver, "resourceclaim", "one-gpu", namespace) is not None


def test_an_untrusted_workload_sharing_one_claim_across_pods_is_denied(apiserver, webhook):
    """Issue 22: a ResourceClaim named by resourceClaimName in a Deployment of two replicas is one GPU shared by
    both pods: untrusted-gpu-isolation denies it (once the webhook's claim cache has the claim; before, its
    no-unknown-claims rule denies it anyway). The same Deployment with a claim per pod from a template is not
    denied by that policy."""
    namespace = create_namespace(apiserver, "drashare", {"aiadmit.dev/tier": "untrusted"})
    resources = client.ResourceV1Api(apiserver.api_client)
    resources.create_namespaced_resource_claim(namespace, claim("shared-gpu", namespace, [dra_request()]))
    resources.create_namespaced_resource_claim_template(namespace, claim_template("per-pod", namespace,
                                                                                  [dra_request()]))
    apps = client.AppsV1Api(apiserver.api_client)

    def deployment(source: dict) -> dict:
        container = {"name": "nb", "image": IMAGE, "resources": {
            "requests": {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "1Gi"}, "limits": {"memory": "16Gi"},
            "claims": [{"name": "gpu"}]}}
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "notebooks", "namespace": namespace},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nb"}},
                         "template": {"metadata": {"labels": {"app": "nb"}},
                                      "spec": {"resourceClaims": [dict(name="gpu", **source)],
                                               "containers": [container]}}}}

    def message_of(body: dict) -> str:
        try:
            apps.create_namespaced_deployment(namespace, body, dry_run="All")
        except ApiException as exc:
            assert exc.status == 403, exc.body
            return json.loads(exc.body)["message"]
        return ""

    shared = deployment({"resourceClaimName": "shared-gpu"})
    sees(lambda: "shares a GPU through DRA" in message_of(shared), "the webhook to see the claim shared-gpu")
    message = message_of(shared)
    assert message.startswith(DENIED), message
    assert "\nuntrusted-gpu-isolation: container nb of template in untrusted Deployment notebooks shares a GPU " \
           "through DRA (ResourceClaim shared-gpu (claim gpu): shared by the 2 pods of Deployment notebooks)" \
           in message, message
    per_pod = message_of(deployment({"resourceClaimTemplateName": "per-pod"}))
    assert "untrusted-gpu-isolation" not in per_pod, per_pod
