"""The deployment as shipped: manifests/ rendered by real kustomize, checked against Kubernetes' schemas, against
the kinds table, and against aiadmit's own policies (dogfooding).

Rendering uses `kubectl kustomize`: $AIADMIT_KUBECTL, the e2e build's cached kubectl (tests/e2e/cluster/build.sh,
pinned v1.37.2; CI warms it with tests/e2e/ci-prepare.sh), or a kubectl on PATH. These unit tests never build one
(a cold build takes minutes and needs Go): without a kubectl the rendering tests skip, saying so. Schemas come from
kubernetes-validate (PyPI, 1.37.0: the OpenAPI of each Kubernetes release it ships) for every supported Kubernetes,
1.35 to 1.37, in strict mode, so a misspelled field fails too, and so does a field an older release lacks. cert-manager's
kinds are not in those schemas: they get structural checks of the fields this deployment relies on.
"""

from __future__ import annotations

import base64
import copy
import functools
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
import yaml

import testdata
from testdata import NO_KUBECTL, cached_kubectl
from webhook.k8s.versions import REFERENCE, SUPPORTED
from webhook.outputs import vapparams

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFESTS = os.path.join(ROOT, "manifests")
K8S_VERSIONS = tuple(f"{v.name}.0" for v in SUPPORTED)  # webhook/k8s/versions.py: 1.35.0, 1.36.0, 1.37.0
NAMESPACE = "aiadmit-system"
OVERLAYS = ("base", "overlays/dev", "overlays/cert-manager", "overlays/audit")
# Resource names of the built-in pod-bearing kinds: an oracle independent of manifests/sync.py's plural rule.
BUILTIN_RESOURCES = {
    ("", "Pod"): "pods", ("", "PodTemplate"): "podtemplates", ("", "ReplicationController"): "replicationcontrollers",
    ("apps", "Deployment"): "deployments", ("apps", "StatefulSet"): "statefulsets",
    ("apps", "ReplicaSet"): "replicasets", ("apps", "DaemonSet"): "daemonsets",
    ("batch", "Job"): "jobs", ("batch", "CronJob"): "cronjobs",
}
# Kinds of the table whose CRDs the shared set does not hold (its NOTES.md: not collected), with their upstream plurals.
UNCOLLECTED_CRDS = {
    ("batch.volcano.sh", "Job"): "jobs", ("serving.kserve.io", "LLMInferenceService"): "llminferenceservices",
    ("ray.io", "RayCronJob"): "raycronjobs",
}


def _sync_module():
    spec = importlib.util.spec_from_file_location("manifests_sync", os.path.join(MANIFESTS, "sync.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def kubectl() -> str:
    found = cached_kubectl()
    if not found:
        pytest.skip(NO_KUBECTL)
    return found


@pytest.fixture(scope="session")
def workdir(tmp_path_factory, kubectl):
    """A copy of manifests/ whose dev overlay has certificates from the real `aiadmit certs generate`."""
    root = tmp_path_factory.mktemp("deploy")
    copy = root / "manifests"
    shutil.copytree(MANIFESTS, copy, ignore=shutil.ignore_patterns("certs"))
    certs = copy / "overlays" / "dev" / "certs"
    _aiadmit("certs", "generate", "--out", str(certs), "--service", "aiadmit", "--namespace", NAMESPACE)
    return copy


def _aiadmit(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, f"aiadmit {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done


def render(kubectl: str, directory) -> tuple[str, list[dict]]:
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True)
    assert done.returncode == 0, f"kubectl kustomize {directory} failed: {done.stderr}"
    return done.stdout, [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(scope="session")
def rendered(kubectl, workdir) -> dict[str, list[dict]]:
    return {name: render(kubectl, workdir / name)[1] for name in OVERLAYS}


def one(objects: list[dict], kind: str, name: str | None = None) -> dict:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def webhooks(objects: list[dict]) -> dict[str, list[dict]]:
    return {kind: one(objects, kind)["webhooks"]
            for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")}


# ---------------------------------------------------------------------------------------------- generated parts
def test_generated_parts_are_up_to_date():
    stale = _sync_module().stale()
    assert not stale, "stale generated files (run python3 manifests/sync.py): " + ", ".join(
        os.path.relpath(p, ROOT) for p in stale)


def test_webhook_rules_cover_the_kinds_table_exactly(rendered):
    with open(os.path.join(ROOT, "webhook", "k8s", "kinds.yaml"), encoding="utf-8") as handle:
        table = [(e.get("group", ""), e["kind"]) for e in yaml.safe_load(handle)["kinds"]]
    crd_plurals = testdata.crd_plurals()
    expected = set()
    for key in table:
        resource = BUILTIN_RESOURCES.get(key) or crd_plurals.get(key) or UNCOLLECTED_CRDS.get(key)
        assert resource, f"kind {key[1]} (group {key[0]!r}): neither a known built-in nor a CRD in {testdata.CRDS_FILE}"
        expected.add((key[0], resource))
    for kind, hooks in webhooks(rendered["base"]).items():
        want = expected | ({("autoscaling", "horizontalpodautoscalers"), ("keda.sh", "scaledobjects"),
                            ("", "pods/ephemeralcontainers"), ("", "pods/resize"), ("", "configmaps"),
                            ("resource.k8s.io", "resourceclaims"), ("resource.k8s.io", "resourceclaimtemplates")}
                           if kind.startswith("Validating") else set())
        (hook,) = hooks
        got = set()
        for rule in hook["rules"]:
            assert rule["operations"] == ["CREATE", "UPDATE"], rule
            assert rule["apiVersions"] == ["*"] and rule["scope"] == "*", rule
            got |= {(group, resource) for group in rule["apiGroups"] for resource in rule["resources"]}
        assert got == want, f"{kind}: missing {sorted(want - got)}, extra {sorted(got - want)}"


# ---------------------------------------------------------------------------------------------- schemas
@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_against_kubernetes_schemas(rendered, overlay, version):
    import kubernetes_validate  # a test dependency (pyproject's [test] extra)

    assert version in kubernetes_validate.utils.all_versions(), f"kubernetes-validate has no schemas of {version}"
    problems = []
    for obj in rendered[overlay]:
        if obj["apiVersion"].startswith("cert-manager.io/"):
            continue  # not a Kubernetes kind: test_cert_manager_overlay checks those
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: no schema ({exc})")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_namespaced_objects_are_in_the_webhook_namespace(rendered, overlay):
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                      "MutatingWebhookConfiguration", "PriorityClass", "CustomResourceDefinition"}
    for obj in rendered[overlay]:
        want = None if obj["kind"] in cluster_scoped else NAMESPACE
        assert obj["metadata"].get("namespace") == want, f"{obj['kind']}/{obj['metadata']['name']}"


# ---------------------------------------------------------------------------------------------- webhooks
def test_webhook_configurations_settings(rendered):
    objects = rendered["base"]
    service = one(objects, "Service", "aiadmit")
    for kind, hooks in webhooks(objects).items():
        (hook,) = hooks
        mutating = kind.startswith("Mutating")
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "None"
        assert hook["matchPolicy"] == "Equivalent"
        assert 1 <= hook["timeoutSeconds"] <= 5, "short: every create waits this long when a replica hangs"
        assert hook["failurePolicy"] == ("Ignore" if mutating else "Fail")
        assert hook.get("reinvocationPolicy") == ("IfNeeded" if mutating else None)
        assert "objectSelector" not in hook
        (expression,) = hook["namespaceSelector"]["matchExpressions"]
        assert expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] == "NotIn"
        assert {NAMESPACE, "kube-system"} <= set(expression["values"])
        ref = hook["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"]) == (service["metadata"]["name"], service["metadata"]["namespace"])
        assert ref["path"] == ("/mutate" if mutating else "/validate")
        assert ref["port"] in [p["port"] for p in service["spec"]["ports"]] and ref["port"] == 443


def test_config_excludes_what_the_webhooks_never_send(rendered):
    """The namespaceSelector and the config agree, so an audit says what the webhook would do."""
    from webhook.language.config import load_config

    config = load_config(None, NAMESPACE)
    for hook in (h for hooks in webhooks(rendered["base"]).values() for h in hooks):
        for namespace in hook["namespaceSelector"]["matchExpressions"][0]["values"]:
            assert config.excluded(namespace), namespace


# ---------------------------------------------------------------------------------------------- deployment
def test_deployment_is_available_and_hardened(rendered):
    objects = rendered["base"]
    deployment = one(objects, "Deployment", "aiadmit")
    spec, pod = deployment["spec"], deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert spec["replicas"] >= 2 and spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    spread = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
    assert spread["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule"
    pdb = one(objects, "PodDisruptionBudget", "aiadmit")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pod["priorityClassName"] == "system-cluster-critical"
    quota = one(objects, "ResourceQuota")
    assert quota["spec"]["scopeSelector"]["matchExpressions"][0]["values"] == ["system-cluster-critical"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    args = dict(a.lstrip("-").partition("=")[::2] for a in container["args"])
    timeout = min(h[0]["timeoutSeconds"] for h in webhooks(objects).values())
    assert float(args["budget"]) < timeout, "the server must answer before the API server gives up"
    grace = container["lifecycle"]["preStop"]["sleep"]["seconds"] + float(args["graceful-timeout"])
    assert grace < pod["terminationGracePeriodSeconds"], "drain within the grace period"
    assert {"cpu", "memory", "ephemeral-storage"} <= set(container["resources"]["requests"])
    assert "memory" in container["resources"]["limits"]
    service = one(objects, "Service", "aiadmit")
    assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"][0]["targetPort"] in [p["name"] for p in container["ports"]]
    policy = one(objects, "NetworkPolicy", "aiadmit")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert {"protocol": "TCP", "port": 8443} in policy["spec"]["ingress"][0]["ports"]


def _mounts(objects: list[dict]) -> dict[str, tuple[str, dict]]:
    """Mount path -> (volume kind, volume) of the webhook container."""
    pod = one(objects, "Deployment", "aiadmit")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    out = {}
    for mount in pod["containers"][0]["volumeMounts"]:
        assert "subPath" not in mount, "subPath mounts never see ConfigMap/Secret updates"
        volume = volumes[mount["name"]]
        out[mount["mountPath"]] = next((k, v) for k, v in volume.items() if k != "name")
    return out


@pytest.mark.parametrize("overlay", ["overlays/dev", "overlays/cert-manager"])
def test_server_arguments_point_at_mounted_files(rendered, overlay):
    objects = rendered[overlay]
    container = one(objects, "Deployment", "aiadmit")["spec"]["template"]["spec"]["containers"][0]
    args = dict(a.lstrip("-").partition("=")[::2] for a in container["args"])
    mounts = _mounts(objects)
    assert args["port"] == "8443" and container["ports"][0]["containerPort"] == 8443
    secret = mounts[os.path.dirname(args["cert-file"])][1]["secretName"]
    assert os.path.dirname(args["key-file"]) == os.path.dirname(args["cert-file"])
    if overlay.endswith("dev"):
        data = one(objects, "Secret", secret)["data"]
        assert {"tls.crt", "tls.key"} <= set(data) and "ca.key" not in data
    else:
        certificate = next(o for o in objects if o["kind"] == "Certificate" and o["spec"]["secretName"] == secret)
        assert certificate["metadata"]["name"] == "aiadmit-serving"
    config_map = mounts[os.path.dirname(args["config"])][1]["name"]
    assert os.path.basename(args["config"]) in one(objects, "ConfigMap", config_map)["data"]
    assert mounts[args["policies"]][0] == "configMap"
    assert mounts["/tmp"][0] == "emptyDir"
    token = mounts["/var/run/secrets/kubernetes.io/serviceaccount"][1]
    assert {"serviceAccountToken", "configMap", "downwardAPI"} == {k for s in token["sources"] for k in s}


def test_rbac_is_read_only_and_exactly_what_the_live_context_watches(rendered):
    """Every cache of webhook/inputs/livefacts.py must be granted (else /readyz never passes), and nothing more."""
    from webhook.inputs.livefacts import LiveFacts

    needed = set()
    for cache in LiveFacts().caches.values():
        group = cache.api_version.rpartition("/")[0]
        needed.add((group, cache.name))
    needed |= {("aiadmit.dev", "policies"), ("aiadmit.dev", "policyexceptions")}  # webhook/app/clusterobjects.py
    role = one(rendered["base"], "ClusterRole", "aiadmit")
    granted, written = set(), set()
    for rule in role["rules"]:
        if rule["verbs"] == ["update"]:  # the one write: the status subresource of aiadmit's own objects
            written |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
            continue
        assert rule["verbs"] == ["get", "list", "watch"], rule
        granted |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == needed, f"missing {sorted(needed - granted)}, not needed {sorted(granted - needed)}"
    assert written == {("aiadmit.dev", "policies/status"), ("aiadmit.dev", "policyexceptions/status")}
    binding = one(rendered["base"], "ClusterRoleBinding", "aiadmit")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "aiadmit", "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert not any(o["kind"] in ("Role", "RoleBinding") for o in rendered["base"])


# ---------------------------------------------------------------------------------------------- first install
def test_priority_classes_component_ships_every_class_the_policy_names(rendered):
    """Every class priority-class allows (and its mutation writes) exists in the component, none is the cluster's
    globalDefault, and the classes that yield by definition (preemptible, batch, untrusted) never preempt."""
    policy = yaml.safe_load(open(os.path.join(ROOT, "policies", "priority-class.yaml"), encoding="utf-8"))
    named = {c for entry in policy["params"]["priorityClasses"].values() for c in entry["allowed"] + [entry["default"]]}
    classes = {o["metadata"]["name"]: o for o in rendered["overlays/audit"] if o["kind"] == "PriorityClass"}
    assert set(classes) == named
    assert not any(c["globalDefault"] for c in classes.values())
    never = {name for name, c in classes.items() if c["preemptionPolicy"] == "Never"}
    assert never == {"ai-training-preemptible", "ai-batch", "ai-untrusted"}
    value = {name: c["value"] for name, c in classes.items()}
    assert value["ai-inference-critical"] > value["ai-inference"] > value["ai-training"] > value["ai-notebook"] \
        > value["ai-untrusted"] > value["ai-batch"] > value["ai-training-preemptible"] > 0
    assert max(value.values()) <= 1_000_000_000  # the API server's ceiling for user classes
    assert not any(o["kind"] == "PriorityClass" for o in rendered["base"]), "optional: not in the base"


@pytest.mark.parametrize("mode", ["audit", "warn"])
def test_rollout_components_lower_every_policy_and_fail_open(kubectl, workdir, tmp_path, mode):
    """base + components/<mode>-mode, loaded exactly as a replica would: no policy keeps a deny (audit: none keeps
    anything above audit), and the validating webhook fails open."""
    directory = workdir / "overlays" / f"under-test-{mode}"  # in the copy: kustomize takes relative paths only
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["../../base"], "components": [f"../../components/{mode}-mode"]}))
    objects = render(kubectl, directory)[1]
    hooks = webhooks(objects)
    assert hooks["ValidatingWebhookConfiguration"][0]["failurePolicy"] == "Ignore"
    assert hooks["MutatingWebhookConfiguration"][0]["failurePolicy"] == "Ignore"
    engine = _engine_from_config_maps(objects, tmp_path)
    allowed = {"audit"} if mode == "audit" else {"warn", "audit"}
    assert set(engine.by_id) == {n[:-5] for n in os.listdir(os.path.join(ROOT, "policies")) if n.endswith(".yaml")}
    assert set(engine.enforcement.actions.values()) <= allowed, engine.enforcement.actions
    # A GPU training Job that fails most of the bundle: admitted, every finding at most `allowed`.
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": "trainer:latest", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    result = _audit(engine, [job], "GPU Job")
    failed = [f for f in result.findings if f.result == "fail"]
    assert {f.policy for f in failed} >= {"resources-declared", "shm-sized", "priority-class"}
    assert {f.action for f in failed} <= allowed

# The peers components/network-policy ships (documentation CIDRs and the usual Prometheus labels), written out here
# as the oracle; tests/e2e/test_helm_chart.py renders the chart's networkPolicy values to the same object.
PORT_8443 = [{"protocol": "TCP", "port": 8443}]
NARROWED_INGRESS = [
    {"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}, {"ipBlock": {"cidr": "2001:db8::/64"}}], "ports": PORT_8443},
    {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
               "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}], "ports": PORT_8443},
]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_network_policy_component_admits_8443_only_from_the_named_peers(kubectl, workdir, rendered, version):
    """base + components/network-policy: the webhook port only from the API server's CIDRs and the scraper's
    namespace and pods, nothing else of the base changed, and the object is a valid NetworkPolicy of every supported
    release. The base itself keeps one rule with no `from` (every source): the API server's address is unnamed."""
    import kubernetes_validate

    directory = workdir / "overlays" / f"under-test-network-policy-{version}"
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["../../base"], "components": ["../../components/network-policy"]}))
    objects = render(kubectl, directory)[1]
    policy = one(objects, "NetworkPolicy", "aiadmit")
    assert policy["spec"]["ingress"] == NARROWED_INGRESS
    kubernetes_validate.validate(policy, version, strict=True)
    base = one(rendered["base"], "NetworkPolicy", "aiadmit")
    assert base["spec"]["ingress"] == [{"ports": PORT_8443}]
    assert {k: v for k, v in policy["spec"].items() if k != "ingress"} == \
        {k: v for k, v in base["spec"].items() if k != "ingress"}
    assert [o for o in objects if o["kind"] != "NetworkPolicy"] == \
        [o for o in rendered["base"] if o["kind"] != "NetworkPolicy"]


@functools.lru_cache(maxsize=1)
def _cidr_item_validator():
    import jsonschema

    with open(os.path.join(ROOT, "charts", "aiadmit", "values.schema.json"), encoding="utf-8") as handle:
        schema = yaml.safe_load(handle)
    return jsonschema.Draft7Validator(schema["properties"]["networkPolicy"]["properties"]["apiServerCIDRs"]["items"])


def _cidr_accepted(value) -> bool:
    """Whether the chart's values.schema.json takes `value` as networkPolicy.apiServerCIDRs' one item (helm checks
    the same schema on install, upgrade, template and lint; tests/e2e/test_helm_chart.py runs helm on a few)."""
    return _cidr_item_validator().is_valid(value)


def test_chart_schema_takes_every_cidr_and_refuses_what_is_not_one():
    """Every IPv4 and IPv6 network (compressed and exploded, every prefix length, seeded random addresses) is taken;
    an address without a prefix, a prefix too long, an octet over 255, a leading zero, a host name, a range or a
    list in one string are refused: an ipBlock the API server would reject, or one that would mean another range."""
    import ipaddress
    import random

    rng = random.Random(21)
    good = ["0.0.0.0/0", "::/0", "10.0.0.0/8", "192.0.2.0/24", "10.1.2.3/32", "2001:db8::/64", "fd00:10::/64",
            "::1/128", "fe80::/10"]
    for _ in range(300):
        v4 = ipaddress.IPv4Network((rng.getrandbits(32), rng.randint(0, 32)), strict=False)
        v6 = ipaddress.IPv6Network((rng.getrandbits(128) >> rng.choice((0, 16, 64, 112)), rng.randint(0, 128)),
                                   strict=False)
        good += [str(v4), str(v6), v6.exploded, str(v6).upper()]
    refused = [g for g in good if not _cidr_accepted(g)]
    assert not refused, refused[:10]
    bad = ["10.0.0.1", "10.0.0.0/33", "256.0.0.0/8", "10.0.0/8", "010.0.0.0/8", "10.0.0.0/08x", "api.example.com/32",
           "fd00::/129", "fd00:::1/64", "1:2:3:4:5:6:7:8:9/64", "12345::/16", "2001:db8::", "10.0.0.0/8,10.1.0.0/16",
           "10.0.0.0-10.0.0.255", " 10.0.0.0/8", "", "/8", 10]
    # (Not here: a trailing newline. Python's `$` matches before one, helm's (Go RE2, as JSON Schema's ECMA-262) does
    # not: test_helm_chart.py::test_values_schema_rejects_what_would_be_silently_ignored has helm refuse it.)
    wrongly_taken = [b for b in bad if _cidr_accepted(b)]
    assert not wrongly_taken, wrongly_taken
    for value in bad[:-1]:  # the oracle agrees: none is a network Python's ipaddress parses as written
        try:
            ipaddress.ip_network(value, strict=False)
            parsed = "/" in value
        except ValueError:
            parsed = False
        assert not parsed, value


def _pem_of(bundle: str) -> bytes:
    return base64.b64decode("".join(bundle.split()))


def test_dev_overlay_injects_its_own_ca(rendered, workdir):
    from cryptography import x509

    ca_pem = (workdir / "overlays" / "dev" / "certs" / "ca.crt").read_bytes()
    objects = rendered["overlays/dev"]
    for kind, hooks in webhooks(objects).items():
        for hook in hooks:
            assert _pem_of(hook["clientConfig"]["caBundle"]) == ca_pem, kind
    secret = next(o for o in objects if o["kind"] == "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert _pem_of(secret["data"]["ca.crt"]) == ca_pem
    serving = x509.load_pem_x509_certificate(_pem_of(secret["data"]["tls.crt"]))
    serving.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName)
    assert f"aiadmit.{NAMESPACE}.svc" in names


def test_dev_overlay_refuses_to_render_without_certificates(kubectl, tmp_path):
    shutil.copytree(MANIFESTS, tmp_path / "manifests", ignore=shutil.ignore_patterns("certs"))
    done = subprocess.run([kubectl, "kustomize", str(tmp_path / "manifests" / "overlays" / "dev")],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "certs/tls.crt" in done.stderr, done.stderr


def test_certs_inject_fills_both_webhook_configurations_of_a_rendered_base(kubectl, tmp_path):
    """The documented flow without kustomize overlays: render, generate + --inject, apply with a TLS Secret."""
    text, before = render(kubectl, os.path.join(MANIFESTS, "base"))
    target = tmp_path / "aiadmit.yaml"
    target.write_text(text)
    out = _aiadmit("certs", "generate", "--out", str(tmp_path / "certs"), "--service", "aiadmit",
                   "--namespace", NAMESPACE, "--inject", str(target))
    assert "injected caBundle into 2 webhook(s)" in out.stdout  # one per configuration
    after = [d for d in yaml.safe_load_all(target.read_text()) if d]
    ca_pem = (tmp_path / "certs" / "ca.crt").read_bytes()
    assert len(after) == len(before)
    for old, new in zip(before, after):
        if new["kind"].endswith("WebhookConfiguration"):
            assert all(_pem_of(h["clientConfig"].pop("caBundle")) == ca_pem for h in new["webhooks"])
        assert new == old, f"{new['kind']}/{new['metadata']['name']} changed beyond caBundle"


def test_cert_manager_overlay(rendered):
    objects = rendered["overlays/cert-manager"]
    issuers = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Issuer"}
    certificates = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Certificate"}
    for hook_config in (one(objects, k) for k in webhooks(objects)):
        annotation = hook_config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        namespace, name = annotation.split("/")
        assert namespace == NAMESPACE and name in certificates
        assert all("caBundle" not in h["clientConfig"] for h in hook_config["webhooks"])
    serving = certificates["aiadmit-serving"]["spec"]
    assert f"aiadmit.{NAMESPACE}.svc" in serving["dnsNames"] and "server auth" in serving["usages"]
    for certificate in certificates.values():
        ref = certificate["spec"]["issuerRef"]
        assert ref["kind"] == "Issuer" and ref["name"] in issuers and ref["group"] == "cert-manager.io"
        assert certificate["spec"]["secretName"]
    ca_issuer_secrets = {i["spec"]["ca"]["secretName"] for i in issuers.values() if "ca" in i["spec"]}
    assert ca_issuer_secrets == {c["spec"]["secretName"] for c in certificates.values() if c["spec"].get("isCA")}


# ---------------------------------------------------------------------------------------------- dogfooding
def _write_config_maps(objects: list[dict], config_dir, policies_dir) -> dict[str, tuple[str, str]]:
    """Write the rendered config and policies ConfigMaps' data as files, as the kubelet would mount them.

    Returns flag -> (path inside the container, path written here) for `--config` and `--policies`."""
    mounts = _mounts(objects)
    container = one(objects, "Deployment", "aiadmit")["spec"]["template"]["spec"]["containers"][0]
    args = dict(a.lstrip("-").partition("=")[::2] for a in container["args"])
    out = {}
    for flag, local in (("config", config_dir), ("policies", policies_dir)):
        directory = args[flag] if flag == "policies" else os.path.dirname(args[flag])
        config_map = one(objects, "ConfigMap", mounts[directory][1]["name"])
        local.mkdir()
        for key, value in config_map["data"].items():
            (local / key).write_text(value)
        written = str(local / os.path.basename(args[flag])) if flag == "config" else str(local)
        out[flag] = (args[flag], written)
    return out


def _engine_from_config_maps(objects: list[dict], tmp_path):
    """The engine exactly as a replica loads it: config and policies from the rendered ConfigMaps' data."""
    from webhook.engine.core import Engine

    paths = _write_config_maps(objects, tmp_path / "config", tmp_path / "policies")
    return Engine.load([paths["policies"][1]], paths["config"][1], NAMESPACE)


def _audit(engine, objects: list[dict], label: str):
    from webhook.app.audit import audit_resources
    from webhook.inputs.sources import load_text

    loaded = load_text(yaml.safe_dump_all(objects, sort_keys=False), label)
    assert not loaded.errors, loaded.errors
    return audit_resources(engine, loaded.resources)


def test_dogfood_our_deployment_passes_our_policies(rendered, tmp_path):
    objects = rendered["overlays/dev"]
    engine = _engine_from_config_maps(objects, tmp_path)
    # In aiadmit-system nothing is checked (the namespace is excluded); evaluate the same objects as if they ran
    # in an ordinary namespace, where every policy of the bundle gets its say.
    moved = [dict(o, metadata=dict(o["metadata"], namespace="dogfood")) if o["metadata"].get("namespace") else o
             for o in objects]
    result = _audit(engine, moved, "rendered overlays/dev")
    assert not result.errors, [e.as_dict() for e in result.errors]
    blocking = [f.as_dict() for f in result.findings if f.action == "deny" and f.result in ("fail", "error")]
    assert not blocking, blocking


def test_dogfood_deployment_would_pass_as_an_untrusted_ai_workload(rendered, tmp_path):
    """Stronger self-check: labelled as an untrusted inference workload, the webhook's own pod still declares its
    resources, is hardened and has a real readiness probe. Only the policies about a pod's own hygiene are asked:
    a model-load startup budget (600 s), a gVisor sandbox or an AI priority class are not meant for a
    control-plane component, and it fails those on purpose (startup-budget, untrusted-sandbox)."""
    objects = rendered["overlays/dev"]
    engine = _engine_from_config_maps(objects, tmp_path)
    deployment = one(objects, "Deployment", "aiadmit")
    labels = {"aiadmit.dev/role": "inference", "aiadmit.dev/tier": "untrusted"}
    labelled = dict(deployment, metadata=dict(deployment["metadata"], namespace="dogfood",
                                              labels={**deployment["metadata"]["labels"], **labels}))
    hygiene = {"resources-declared", "untrusted-hardening", "devices-declared", "hugepages-consistent",
               "semantic-readiness"}
    result = _audit(engine, [labelled], "labelled Deployment")
    (evaluation,) = result.evaluations
    assert {"untrusted", "inference"} <= evaluation.classes
    in_bundle = hygiene & set(engine.by_id)
    assert "resources-declared" in in_bundle
    assert in_bundle <= set(evaluation.policies), f"did not apply: {in_bundle - set(evaluation.policies)}"
    failing = [f.as_dict() for f in result.findings if f.policy in hygiene and f.result in ("fail", "error")]
    assert not failing, failing


# ---------------------------------------------------------------------------------------------- the server
def test_the_deployment_arguments_start_the_real_server(rendered, workdir, tmp_path):
    """`aiadmit serve` with the Deployment's exact arguments (paths mapped to the rendered files, no cluster):
    it must accept them, serve TLS with the dev overlay's certificate, and pass both probes."""
    import socket
    import ssl
    import time
    import urllib.request

    objects = rendered["overlays/dev"]
    container = one(objects, "Deployment", "aiadmit")["spec"]["template"]["spec"]["containers"][0]
    config_dir, policies_dir = tmp_path / "config", tmp_path / "policies"
    engine_paths = _write_config_maps(objects, config_dir, policies_dir)
    certs = workdir / "overlays" / "dev" / "certs"
    mapped = {"/certs": str(certs), os.path.dirname(engine_paths["config"][0]): str(config_dir),
              engine_paths["policies"][0]: str(policies_dir)}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = []
    for arg in container["args"]:
        if arg == "--in-cluster":
            arg = "--no-cluster"
        elif arg.startswith("--port="):
            arg = f"--port={port}"
        for inside, outside in mapped.items():
            arg = arg.replace(inside, outside)
        args.append(arg)
    server = subprocess.Popen([sys.executable, "-m", "webhook", "serve", "--host=127.0.0.1", *args], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    try:
        deadline = time.monotonic() + 60
        status = {}
        while time.monotonic() < deadline and server.poll() is None and len(status) < 2:
            for path in ("/healthz", "/readyz"):
                try:
                    # The certificate names aiadmit.aiadmit-system.svc, not 127.0.0.1: check the chain, not the host.
                    context.check_hostname = False
                    with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=context, timeout=2) as r:
                        status[path] = r.status
                except OSError:
                    time.sleep(0.3)
        assert status == {"/healthz": 200, "/readyz": 200}, f"probes: {status}; server exited {server.poll()}"
    finally:
        server.terminate()
        try:
            output = server.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            server.kill()
            output = server.communicate()[0]
    assert server.returncode == 0, output[-2000:]


# ---------------------------------------------------------------------------------------------- the image
def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    with open(os.path.join(ROOT, "Dockerfile"), encoding="utf-8") as handle:
        text = handle.read()
    joined = text.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


def test_dockerfile_pins_base_by_digest_runs_non_root_and_installs_only_runtime_dependencies():
    """Docker is not available here to build it: these are the properties the file itself must have."""
    import re

    instructions = _dockerfile()
    args = dict(a.split("=", 1) for word, a in instructions if word == "ARG" and "=" in a)
    stages = [i for i, (word, _) in enumerate(instructions) if word == "FROM"]
    assert len(stages) >= 2, "multi-stage: build tools and wheels stay in the build stage"
    for index in stages:
        image = instructions[index][1].split()[0]
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", image), f"not pinned by digest: {image}"
    final = instructions[stages[-1]:]
    users = [a for word, a in final if word == "USER"]
    assert users and users[-1] == "65532:65532", "the last USER must be the non-root 65532"
    assert ("ENTRYPOINT", '["aiadmit", "serve"]') in final
    runs = " ".join(a for word, a in instructions if word == "RUN")
    for dev in ("[test]", "pytest", "jsonpatch", "pre-commit", "kubernetes-validate", "pip install -e"):
        assert dev not in runs, f"a development dependency in the image: {dev}"
    # pip runs from its wheel there ("$pip_whl/pip" install ...): every install, however pip is spelt.
    installs = [part for word, a in final if word == "RUN" for part in a.split("&&") if re.search(r'pip"? install', part)]
    assert installs and all("--no-index" in a for a in installs), "the final stage installs only the built wheels"
    assert any("--require-hashes" in a for a in installs), "dependencies installed by hash (requirements.lock)"
    assert not any(word in ("ADD", "COPY") and "/wheels" in a for word, a in final), "wheels must not stay in a layer"


def test_every_package_of_the_cli_is_in_the_wheel():
    """The image installs a wheel, not this checkout: a sub-package missing from pyproject would silently drop
    every `aiadmit` command it holds (the CLI skips command modules it cannot import)."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        packaged = set(tomllib.load(handle)["tool"]["setuptools"]["packages"])
    packages = {os.path.relpath(d, ROOT).replace(os.sep, ".") for d, _, files in os.walk(os.path.join(ROOT, "webhook"))
                if "__init__.py" in files}
    assert packages <= packaged, f"not packaged: {sorted(packages - packaged)}"


def test_dockerignore_keeps_the_build_context_to_what_the_image_needs():
    with open(os.path.join(ROOT, ".dockerignore"), encoding="utf-8") as handle:
        patterns = [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    assert patterns[0] == "*", "exclude everything, then allow"
    allowed = {p[1:] for p in patterns if p.startswith("!")}
    # manifests/image: wheels.sh and the lock files, shared with the Docker-free build (manifests/image/build.sh).
    assert allowed == {"pyproject.toml", "README.md", "webhook", "policies", "manifests/image"}
    copied = {a.split()[0] for word, a in _dockerfile() if word == "COPY" and not a.startswith("--")}
    assert copied <= {"pyproject.toml", "webhook", "policies", "manifests/image"}, copied


def test_every_kustomize_path_in_the_docs_is_a_kustomization():
    """`kubectl apply -k manifests/` used to be what a reader tried: every `-k PATH` / `kubectl kustomize PATH` the
    install docs show must name a directory with a kustomization (placeholders such as <overlay> aside)."""
    import re

    named = set()
    for doc in ("README.md", "manifests/README.md", "docs/operations.md"):
        with open(os.path.join(ROOT, doc), encoding="utf-8") as handle:
            text = handle.read()
        named |= {(doc, m) for m in re.findall(r"(?:-k|kubectl kustomize)\s+(manifests/[\w./<>-]*)", text)}
    assert len(named) >= 5, named
    for doc, path in sorted(named):
        if "<" in path:
            continue
        assert os.path.isfile(os.path.join(ROOT, path, "kustomization.yaml")), f"{doc}: {path} is not a kustomization"


# ---------------------------------------------------------------------------------------------- in-tree policies
# The kustomize installs of the in-tree policies (issue 23 item 2): manifests/in-tree instead of the webhook, the
# `in-tree` component beside it. The shipped objects are generated by sync.py (test_generated_parts_are_up_to_date);
# here they must be exactly `aiadmit export` of the bundle under the base config, and the component's config must
# switch the webhook to leave those rules to the API server. The chart's `inTree.mode` renders the same objects
# (tests/e2e/test_helm_chart.py, which also has the API server accept them).
PART_OF = "app.kubernetes.io/part-of"


def _in_tree_exported() -> list[dict]:
    from webhook.engine.core import Engine
    from webhook.outputs.vap import export

    engine = Engine.load(config_path=os.path.join(MANIFESTS, "base", "config.yaml"))
    written = [r for r in export(engine.policies, engine.config, REFERENCE) if r.objects or r.mutating]
    return [vapparams.crd([r.policy for r in written if r.params])] + \
        [o for r in written for o in r.params + r.objects + r.mutating]


def _without_part_of(objects: list[dict]) -> list[dict]:
    out = []
    for obj in objects:
        obj = copy.deepcopy(obj)
        obj["metadata"].get("labels", {}).pop(PART_OF, None)
        out.append(obj)
    return out


def _kind_name(obj: dict) -> tuple:
    return obj["kind"], obj["metadata"]["name"]


def test_the_in_tree_kustomization_is_the_export_and_nothing_else(kubectl):
    objects = render(kubectl, os.path.join(MANIFESTS, "in-tree"))[1]
    assert sorted(_without_part_of(objects), key=_kind_name) == \
        sorted(_without_part_of(_in_tree_exported()), key=_kind_name)
    kinds = {o["kind"] for o in objects}
    assert kinds == {"CustomResourceDefinition", "PolicyParams", "ValidatingAdmissionPolicy",
                     "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    assert all(o["metadata"]["labels"][PART_OF] == "aiadmit" for o in objects)


def test_the_in_tree_component_adds_the_policies_beside_the_webhook_and_switches_it(kubectl, tmp_path):
    root = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, root, ignore=shutil.ignore_patterns("certs"))
    directory = root / "overlays" / "under-test"
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["../../base"], "components": ["../../components/in-tree"]}))
    objects = render(kubectl, directory)[1]
    plain = render(kubectl, root / "base")[1]
    by_key = {_kind_name(o): o for o in objects}
    exported = {_kind_name(o): o for o in _without_part_of(_in_tree_exported())}
    # every exported object, once (the CRD is the base's), and everything of the webhook as well
    assert set(exported) <= set(by_key)
    assert len(by_key) == len(objects)
    for key, obj in exported.items():
        assert _without_part_of([by_key[key]])[0] == obj, key
    webhook_kinds = {"Deployment", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
    assert webhook_kinds <= {o["kind"] for o in objects}
    # the webhook as a replica loads it: the switch on, for the version the objects were exported for
    (tmp_path / "beside").mkdir()
    (tmp_path / "plain").mkdir()
    engine = _engine_from_config_maps(objects, tmp_path / "beside")
    assert engine.config.in_tree == REFERENCE.name
    assert _engine_from_config_maps(plain, tmp_path / "plain").config.in_tree is None
    annotations = {o["metadata"]["annotations"]["aiadmit.dev/kubernetes-version"]
                   for o in exported.values() if o["kind"].endswith("AdmissionPolicy")}
    assert annotations == {REFERENCE.name}


def test_the_base_has_the_param_kind_so_switching_needs_no_crd_change(kubectl):
    objects = render(kubectl, os.path.join(MANIFESTS, "base"))[1]
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    assert f"{vapparams.PLURAL}.{vapparams.GROUP}" in {c["metadata"]["name"] for c in crds}
    assert not [o for o in objects if o["kind"].endswith("AdmissionPolicy")]  # the webhook alone by default


CLUSTER_OBJECTS = os.path.join(MANIFESTS, "components", "cluster-objects")


def test_the_cluster_objects_component_adds_its_objects_as_written_and_each_loads(kubectl, tmp_path):
    """The component's Policy and PolicyException objects are in the rendering as their files say (the part-of label
    added; a Policy without a namespace, the exception in its own), everything of the base unchanged; and each loads
    with the webhook's full check (language/objects.py), as the webhook and the reports controller will load it."""
    from webhook.engine.core import Engine
    from webhook.language.objects import load_exception_object, load_policy_object

    root = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, root, ignore=shutil.ignore_patterns("certs"))
    directory = root / "overlays" / "under-test"
    directory.mkdir()
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["../../base"], "components": ["../../components/cluster-objects"]}))
    objects = render(kubectl, directory)[1]
    plain = render(kubectl, root / "base")[1]
    added = [o for o in objects if o["kind"] in ("Policy", "PolicyException")]
    assert sorted(_kind_name(o) for o in objects if o not in added) == sorted(_kind_name(o) for o in plain)
    with open(os.path.join(CLUSTER_OBJECTS, "kustomization.yaml"), encoding="utf-8") as handle:
        listed = yaml.safe_load(handle)["resources"]
    written = []
    for name in listed:
        with open(os.path.join(CLUSTER_OBJECTS, name), encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
        doc["metadata"].setdefault("labels", {})[PART_OF] = "aiadmit"
        written.append(doc)
    assert sorted(added, key=_kind_name) == sorted(written, key=_kind_name)
    (policy,) = [o for o in added if o["kind"] == "Policy"]
    (exception,) = [o for o in added if o["kind"] == "PolicyException"]
    assert "namespace" not in policy["metadata"] and exception["metadata"]["namespace"] == "team-a"
    loaded, problems = load_policy_object(dict(policy, metadata=dict(policy["metadata"], uid="u", generation=1)))
    assert problems == [] and loaded.id == "owner-label"
    ids = set(Engine.load(None, None).by_id) | {loaded.id}
    lifted, problems = load_exception_object(exception, ids)
    assert problems == [] and lifted.namespaces == ("team-a",) and lifted.policies == ("owner-label",)
