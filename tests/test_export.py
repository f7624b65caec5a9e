"""`aiadmit export`: the objects are what a 1.37 API server accepts, and the exported rules answer as the engine.

Three checks, each against the real thing that runs here:
- every object validates, strictly (no unknown field), against the admissionregistration.k8s.io/v1 schemas of
  Kubernetes 1.37 (tests/data/admissionregistration-v1-1.37.json, from the k8s.io/kubernetes v1.37.2 module);
- Kubernetes' own CEL (the k8scel oracle, k8s.io/apiserver v0.37.2) compiles every exported expression in the
  environment a 1.37 API server gives a new expression, with the type the field needs;
- on every object of the built-in bundle's policy tests and the corpus, the oracle evaluating the exported
  variables and validations fails exactly the exported rules the engine fails, with the engine's messages.
"""

from __future__ import annotations

import base64
import copy
import glob
import json
import os
import re
import subprocess
import sys

import jsonschema
import pytest
import yaml

from objects import gpu_pod
from k8scel import oracle  # noqa: F401 - the fixture (built once per session)
from webhook.engine.core import Engine
from webhook.inputs.sources import load_paths
from webhook.k8s.versions import REFERENCE, version
from webhook.outputs import vap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCHEMAS = os.path.join(HERE, "data", "admissionregistration-v1-1.37.json")
PREFIX = "io.k8s.api.admissionregistration.v1."


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


@pytest.fixture(scope="module")
def exported(engine):
    return vap.export(engine.policies, engine.config, REFERENCE)


def _strict(node):
    """The schema with every object closed: a field the API server does not know is an error, as `kubectl
    --validate=strict` and server-side field validation make it."""
    if isinstance(node, dict):
        node = {k: _strict(v) for k, v in node.items()}
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


def _validator(kind: str):
    with open(SCHEMAS, encoding="utf-8") as handle:
        data = json.load(handle)
    schemas = _strict(data["components"]["schemas"])
    root = {"components": {"schemas": schemas}, "$ref": f"#/components/schemas/{PREFIX}{kind}"}
    return jsonschema.Draft7Validator(root)


def test_every_object_validates_strictly_against_the_1_37_schemas(exported):
    objects = [o for result in exported for o in result.objects + result.mutating]
    assert {o["kind"] for o in objects} == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                                            "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    validators = {}
    for obj in objects:
        validator = validators.setdefault(obj["kind"], _validator(obj["kind"]))
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
        assert not errors, (obj["metadata"]["name"], errors[:5])
        assert obj["apiVersion"] == "admissionregistration.k8s.io/v1"


def test_the_strict_schema_refuses_an_unknown_field(exported):
    obj = copy.deepcopy(next(o for r in exported for o in r.objects if o["kind"] == "ValidatingAdmissionPolicy"))
    obj["spec"]["validations"][0]["messageExpresion"] = "'typo'"
    assert list(_validator("ValidatingAdmissionPolicy").iter_errors(obj))


def _expressions(obj):
    spec = obj["spec"]
    for variable in spec.get("variables", ()):
        yield variable["expression"], None
    for condition in spec.get("matchConditions", ()):
        yield condition["expression"], "bool"
    for validation in spec.get("validations", ()):
        yield validation["expression"], "bool"
        yield validation["messageExpression"], "string"


@pytest.mark.k8scel
def test_kubernetes_cel_compiles_every_exported_expression(exported, oracle):  # noqa: F811
    asked = [(e, t) for r in exported for o in r.objects + r.mutating if o["kind"].endswith("AdmissionPolicy")
             for e, t in _expressions(o)]  # a MAP's variables (its JSON Patch type is the API server's to check)
    assert len(asked) > 20
    # A 1.37 API server compiles a new expression at compatibility version 1.36, and 1.35's at 1.34.
    for compatibility in ("1.36", "1.34"):
        answers = oracle.ask([{"expr": e, "compatibility": compatibility, "environment": "new"} for e, _ in asked])
        for (expression, wanted), answer in zip(asked, answers):
            assert answer["compiled"], (compatibility, answer.get("error"), expression[:300])
            if wanted:
                assert answer["outputType"] in (wanted, "dyn"), (answer["outputType"], expression[:300])


# ------------------------------------------------------------------------------------ the same verdicts
def _objects():
    """Every object of the bundle's policy tests and the corpus, each once."""
    paths = sorted(glob.glob(os.path.join(HERE, "policies", "*", "*.yaml")))
    paths = [p for p in paths if not p.endswith("test.yaml")]
    paths += sorted(glob.glob(os.path.join(HERE, "data", "corpus", "**", "*.yaml"), recursive=True))
    loaded = load_paths([p for p in paths if "_unparseable" not in p])
    return [r for r in loaded.resources if r.kind not in ("PolicyTest",)]


def _ask(oracle, requests):  # noqa: F811
    """The oracle's answers, asked 25 at a time (each batch is bounded in time by the oracle's client)."""
    out = []
    for start in range(0, len(requests), 25):
        out += oracle.ask(requests[start:start + 25])
    return out


def _vars(obj, values, params=None):
    """What the API server binds: the object, the variables so far, its namespace (here without labels, as the
    engine sees a namespace it knows nothing of) and the binding's param object (a VAP with `paramKind`)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": (obj.get("metadata") or {}).get("namespace") or "default"}}
    found = {"object": obj, "variables": values, "namespaceObject": namespace}
    if params is not None:
        found["params"] = params
    return found


def _oracle_verdicts(oracle, pairs, params=None):  # noqa: F811
    """For each (object, VAP): (failed validation indexes, their messages), the VAP evaluated by Kubernetes' CEL:
    its variables in order, then each validation; an evaluation error fails the validation (failurePolicy Fail).
    Asked in batches: one round trip per variable, one for the validations, one for the messages."""
    values = [{} for _ in pairs]
    variables = pairs[0][1]["spec"]["variables"]
    chain = next(v["expression"] for v in variables if v["name"] == "templates")
    walk_of = {(kind, group or ""): name for kind, group, name in re.findall(
        r'object\.kind == "(\w+)" && object\.apiVersion(?:\.startsWith\("([^"]+)/"\)| == "v1") \? variables\.(\w+)',
        chain)}
    walks = set(walk_of.values())
    for variable in variables:
        name = variable["name"]
        # VAP variables are lazy: a kind's walk is evaluated only for an object of that kind
        asked = [i for i, (obj, _) in enumerate(pairs) if name not in walks or
                 walk_of.get((obj["kind"], obj["apiVersion"].rpartition("/")[0])) == name]
        answers = _ask(oracle, [{"expr": variable["expression"], "eval": True,
                                 "vars": _vars(pairs[i][0], values[i], params)} for i in asked])
        for i, answer in zip(asked, answers):
            assert answer["compiled"] and "evalError" not in answer, (name, answer)
            values[i][name] = answer["value"]
    asked = [(i, j) for i, (_, vap_) in enumerate(pairs) for j in range(len(vap_["spec"]["validations"]))]
    answers = _ask(oracle, [{"expr": pairs[i][1]["spec"]["validations"][j]["expression"], "eval": True,
                           "vars": _vars(pairs[i][0], values[i], params)} for i, j in asked])
    failed = [(i, j) for (i, j), answer in zip(asked, answers)
              if "evalError" in answer or answer.get("value") is not True]
    messages = _ask(oracle, [{"expr": pairs[i][1]["spec"]["validations"][j]["messageExpression"], "eval": True,
                            "vars": _vars(pairs[i][0], values[i], params)} for i, j in failed])
    out = [{} for _ in pairs]
    for (i, j), message in zip(failed, messages):
        out[i][j] = message.get("value", message.get("evalError"))
    return out


@pytest.mark.k8scel
def test_exported_rules_fail_where_the_engine_fails_them(engine, exported, oracle):  # noqa: F811
    answers, failures = _agreement(engine, exported, oracle)
    assert answers >= 200 and failures >= 20, (answers, failures)


# A config whose params differ from the policies' defaults: `all` exposes no device (devices-declared), and no
# annotation asks for a GPU fraction (untrusted-gpu-isolation).
NON_DEFAULT = """apiVersion: aiadmit.dev/v1alpha1
kind: Config
policies:
  devices-declared:
    params: {noDeviceValues: ["", void, none, all]}
  untrusted-gpu-isolation:
    params: {sharingAnnotations: []}
"""


@pytest.mark.k8scel
def test_with_non_default_params_the_param_object_carries_them_and_the_answers_still_agree(
        engine, exported, oracle, tmp_path):  # noqa: F811
    config = tmp_path / "config.yaml"
    config.write_text(NON_DEFAULT)
    other = Engine.load(config_path=str(config))
    changed = vap.export(other.policies, other.config, REFERENCE)
    answers, failures = _agreement(other, changed, oracle)
    assert answers >= 200, answers
    assert failures < _agreement(engine, exported, oracle)[1]  # the params changed verdicts (fewer failures)


def test_a_config_change_changes_only_the_param_objects(engine, exported, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(NON_DEFAULT)
    other = Engine.load(config_path=str(config))
    changed = {r.policy.id: r for r in vap.export(other.policies, other.config, REFERENCE)}
    readers = set()
    for result in exported:
        assert changed[result.policy.id].objects == result.objects, result.policy.id
        assert changed[result.policy.id].mutating == result.mutating, result.policy.id
        if result.params:
            readers.add(result.policy.id)
            policy = next(o for o in result.objects if o["kind"] == "ValidatingAdmissionPolicy")
            assert policy["spec"]["paramKind"] == {"apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyParams"}
            for binding in [o for o in result.objects if o["kind"].endswith("Binding")]:
                assert binding["spec"]["paramRef"] == {"name": f"aiadmit-{result.policy.id}",
                                                       "parameterNotFoundAction": "Deny"}
    assert {"devices-declared", "image-digest", "untrusted-gpu-isolation"} <= readers
    assert changed["devices-declared"].params[0]["spec"]["noDeviceValues"] == ["", "void", "none", "all"]
    assert "all" not in next(r for r in exported if r.policy.id == "devices-declared").params[0]["spec"][
        "noDeviceValues"]
    assert changed["untrusted-gpu-isolation"].params[0]["spec"]["sharingAnnotations"] == []


def test_static_policies_fold_the_params_in(engine):
    static = {r.policy.id: r for r in vap.export(engine.policies, engine.config, REFERENCE, static=True)}
    assert not any(r.params for r in static.values())
    text = json.dumps([o for r in static.values() for o in r.objects + r.mutating])
    assert "paramKind" not in text and "params." not in text and "paramRef" not in text
    assert "NVIDIA_VISIBLE_DEVICES" in text  # devices-declared's visibleDevicesEnv, folded


def test_the_param_kind_is_typed_from_the_policies_params(engine, exported):
    from webhook.outputs import vapparams

    crd = vapparams.crd([r.policy for r in exported if r.params])
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["visibleDevicesEnv"] == {"type": "array", "items": {"type": "string"}}
    assert spec["referencePattern"] == {"type": "string"}
    assert crd["spec"]["scope"] == "Cluster"
    # every param object of the export validates against that schema (the API server checks it on write)
    validator = jsonschema.Draft7Validator(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    for result in exported:
        for obj in result.params:
            assert not list(validator.iter_errors(obj)), obj["metadata"]["name"]
    assert list(validator.iter_errors({"spec": {"visibleDevicesEnv": "NVIDIA_VISIBLE_DEVICES"}}))


def _agreement(engine, exported, oracle):  # noqa: F811
    """(objects compared, failures found) of the oracle running the exported VAPs (and their param objects) on the
    bundle's test objects and the corpus, asserting each answer is the engine's."""
    params = {}
    by_kind = {}
    for result in exported:
        if result.objects:
            for kind in result.kinds:
                by_kind.setdefault(kind, []).append(result)
    pairs, expected = [], []
    for resource in _objects():
        results = by_kind.get((resource.kind, resource.group))
        if not results or not resource.obj.get("apiVersion"):
            continue
        evaluation = engine.evaluate(resource, None)
        if evaluation.errors:
            continue
        for result in results:
            where = f"{resource.origin.file}: {resource.kind}/{resource.name} {result.policy.id}"
            selector = result.objects[1]["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]
            if resource.namespace in selector["values"]:  # the binding does not match it; the engine exempts it
                assert not [f for f in evaluation.findings if f.policy == result.policy.id and f.blocking], where
                continue
            for policy in [o for o in result.objects if o["kind"] == "ValidatingAdmissionPolicy"]:
                rules = policy["metadata"]["annotations"]["aiadmit.dev/rules"].split(",")
                ours = {}
                for finding in evaluation.findings:
                    if finding.policy == result.policy.id and finding.rule in rules \
                            and finding.result in ("fail", "error"):
                        ours.setdefault(finding.rule, []).append(
                            " ".join(f"{finding.policy}: {finding.message}".split()))
                pairs.append((resource.obj, policy))
                expected.append((where, rules, ours))
                params[id(policy)] = result.params[0] if "paramKind" in policy["spec"] else None
    answers = []
    for group in {id(p[1]): p[1] for p in pairs}.values():  # one VAP at a time: its variables are its own
        chosen = [n for n, p in enumerate(pairs) if p[1] is group]
        answers += list(zip(chosen, _oracle_verdicts(oracle, [pairs[n] for n in chosen], params[id(group)])))
    failures = 0
    for n, theirs in answers:
        where, rules, ours = expected[n]
        named = {rules[j]: message for j, message in theirs.items()}
        assert sorted(named) == sorted(ours), (where, sorted(named), sorted(ours))
        for rule, message in named.items():
            # one message per failing container, in walk order; a map's keys (PyTorchJob's replica types) come in
            # no defined order in CEL, so the pieces are compared as a multiset
            assert sorted(message.split("; ")) == sorted("; ".join(ours[rule]).split("; ")), (where, rule)
        failures += len(named)
    return len(answers), failures


# ------------------------------------------------------------------------------------ the command
def _aiadmit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_export_writes_one_file_per_policy_and_lists_what_it_leaves(tmp_path):
    done = _aiadmit("export", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    files = sorted(os.listdir(tmp_path))
    assert "resources-declared.yaml" in files and "image-digest.yaml" in files
    # shm-sized reads the container's DRA claims (a cluster fact: which claims hold accelerators), so it stays with
    # the webhook
    assert "shm-sized.yaml" not in files
    docs = list(yaml.safe_load_all((tmp_path / "resources-declared.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["ValidatingAdmissionPolicy"] + ["ValidatingAdmissionPolicyBinding"] * 3
    assert [d["spec"]["validationActions"] for d in docs[1:]] == [["Deny"], ["Warn"], ["Audit"]]
    assert ("resources-declared: exported cpu-request, memory-request, ephemeral-storage-request, memory-limit"
            in done.stderr)
    assert "shm-sized: exported nothing" in done.stderr
    assert "not exported: node-name: it needs cluster facts (nodes, resourceClaims)" in done.stderr
    assert "gpu-quota: exported nothing" in done.stderr
    assert ("  mutations exported: no-service-account-token, no-privilege-escalation, run-as-non-root, "
            "drop-all-capabilities, add-all-to-drop, seccomp") in done.stderr
    assert "not exported: mutation add-volume: it calls formatBytes()" in done.stderr
    hardening = list(yaml.safe_load_all((tmp_path / "untrusted-hardening.yaml").read_text()))
    assert [d["kind"] for d in hardening][-2:] == ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]


def test_static_format_names_end_in_the_reserved_suffix(tmp_path):
    done = _aiadmit("export", "--format", "static", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    docs = list(yaml.safe_load_all((tmp_path / "validating-policies" / "resources-declared.yaml").read_text()))
    assert all(d["metadata"]["name"].endswith(".static.k8s.io") for d in docs)
    assert all(d["spec"]["policyName"] == docs[0]["metadata"]["name"] for d in docs[1:])
    # the MutatingAdmissionPolicies are the other plugin's: a directory of their own
    mutating = list(yaml.safe_load_all((tmp_path / "mutating-policies" / "untrusted-hardening.yaml").read_text()))
    assert [d["kind"] for d in mutating] == ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]
    assert all(d["metadata"]["name"] == "aiadmit-untrusted-hardening.static.k8s.io" for d in mutating)
    assert mutating[1]["spec"]["policyName"] == mutating[0]["metadata"]["name"]
    validating = yaml.safe_load_all((tmp_path / "validating-policies" / "untrusted-hardening.yaml").read_text())
    assert {d["kind"] for d in validating} == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    old = _aiadmit("export", "--format", "static", "--kubernetes-version", "1.35", "--out", str(tmp_path))
    assert old.returncode == 2 and "has no staticManifestsDir" in old.stderr


def test_unsupported_version_is_a_usage_error():
    done = _aiadmit("export", "--kubernetes-version", "1.34")
    assert done.returncode == 2 and "supported: 1.35, 1.36, 1.37" in done.stderr


def test_check_fails_a_portable_policy_that_is_not_exported_whole(tmp_path):
    source = open(os.path.join(ROOT, "policies", "resources-declared.yaml"), encoding="utf-8").read()
    whole = source.replace("action: deny\n", "action: deny\nportable: true\n", 1)
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "resources-declared.yaml").write_text(whole)
    done = _aiadmit("export", "--check", "--policies", str(tmp_path / "p"))
    assert done.returncode == 1, done.stderr
    assert "marked portable but not exported whole: resources-declared" in done.stderr
    assert "cpu-per-device" in done.stderr
    # without the rules that cannot be exported, and without the kinds the walk cannot write, it passes
    rules = whole.split("  - name: cpu-per-device")[0]
    (tmp_path / "p" / "resources-declared.yaml").write_text(rules.replace(
        "match:\n  anyClasses: [ai]\n",
        "match:\n  anyClasses: [ai]\n  kinds: [Pod, Deployment, Job, PyTorchJob]\n"))
    done = _aiadmit("export", "--check", "--policies", str(tmp_path / "p"))
    assert done.returncode == 0, done.stderr
    assert version("1.37") is REFERENCE


def test_a_rule_with_a_lower_action_gets_a_policy_of_its_own(tmp_path):
    """A binding's validationActions hold for all its policy's validations, so a warn rule of a deny policy is
    exported as `aiadmit-<id>-at-warn`, with its own bindings (warn, and audit where the label lowers it)."""
    source = open(os.path.join(ROOT, "policies", "resources-declared.yaml"), encoding="utf-8").read()
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "resources-declared.yaml").write_text(
        source.replace("  - name: memory-limit\n", "  - name: memory-limit\n    action: warn\n", 1))
    done = _aiadmit("export", "--policies", str(tmp_path / "p"), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    docs = list(yaml.safe_load_all((tmp_path / "out" / "resources-declared.yaml").read_text()))
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    assert sorted(policies) == ["aiadmit-resources-declared", "aiadmit-resources-declared-at-warn"]
    low = policies["aiadmit-resources-declared-at-warn"]
    assert low["metadata"]["annotations"]["aiadmit.dev/rules"] == "memory-limit"
    assert [v["message"].split(":")[0] for v in low["spec"]["validations"]] == ["resources-declared"]
    assert low["spec"]["failurePolicy"] == "Ignore"
    assert "memory-limit" not in policies["aiadmit-resources-declared"]["metadata"]["annotations"]["aiadmit.dev/rules"]
    bindings = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert {n: (b["policyName"], b["validationActions"]) for n, b in bindings.items()
            if "-at-" in n} == {
        "aiadmit-resources-declared-at-warn": ("aiadmit-resources-declared-at-warn", ["Warn"]),
        "aiadmit-resources-declared-at-warn-audit": ("aiadmit-resources-declared-at-warn", ["Audit"])}


# ------------------------------------------------------------------------------------ side by side (inTree)
def _review(obj, operation="CREATE"):
    return {"uid": "7f1c", "kind": {"group": "", "version": "v1", "kind": obj["kind"]},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"], "operation": operation, "userInfo": {"username": "alice"},
            "object": obj, "oldObject": None}


def test_in_tree_switch_leaves_exported_rules_to_the_api_server_on_create_only(tmp_path):
    from webhook.app.admission import validate

    pod = gpu_pod()  # violates resources-declared `cpu-request`, which is exported
    del pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    plain = Engine.load()
    denied = validate(plain, _review(pod))
    assert not denied.response["allowed"] and "must request a non-zero cpu" in denied.response["status"]["message"]
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\ninTree: {skipExported: true}\n")
    side = Engine.load(config_path=str(config))
    assert side.config.in_tree == "1.37"
    allowed = validate(side, _review(pod))
    assert "must request a non-zero cpu" not in allowed.response.get("status", {}).get("message", ""), allowed.response
    # a rule that is not exported stays the webhook's: shm-sized reads DRA claims (a cluster fact)
    unmounted = gpu_pod(shm=False)
    still = validate(side, _review(unmounted))
    assert "shm-sized" in still.response["status"]["message"]
    # UPDATE is not exported: the webhook judges it whole (a new violation on update is denied)
    update = _review(pod, "UPDATE")
    update["oldObject"] = gpu_pod()
    assert "must request a non-zero cpu" in validate(side, update).response["status"]["message"]


def test_in_tree_switch_leaves_exported_mutations_to_the_api_server_on_create_only(tmp_path):
    from webhook.app.admission import mutate

    pod = gpu_pod()
    pod["metadata"].setdefault("labels", {})["aiadmit.dev/tier"] = "untrusted"

    def patched_policies(engine, review):
        response = mutate(engine, review).response
        patch = json.loads(base64.b64decode(response["patch"])) if response.get("patch") else []
        return {op["path"].rsplit("/", 1)[-1] for op in patch}, response

    plain, _ = patched_policies(Engine.load(), _review(pod))
    assert {"automountServiceAccountToken", "securityContext"} <= plain, plain  # untrusted-hardening's
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\ninTree: {skipExported: true}\n")
    side = Engine.load(config_path=str(config))
    skipped, _ = patched_policies(side, _review(pod))
    assert not {"automountServiceAccountToken", "securityContext"} & skipped, skipped
    assert "runtimeClassName" in skipped  # untrusted-sandbox's mutation is not exported: the webhook keeps it
    # not exported on UPDATE (the webhook mutates there when the templates change): the webhook keeps them
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "d", "namespace": "team", "labels": {"aiadmit.dev/tier": "untrusted"}},
                  "spec": {"selector": {}, "template": {"metadata": {"labels": {"aiadmit.dev/tier": "untrusted"}},
                                                        "spec": pod["spec"]}}}
    review = _review(deployment, "UPDATE")
    review["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
    old = copy.deepcopy(deployment)
    old["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/old:v0"
    review["oldObject"] = old
    updated, _ = patched_policies(side, review)
    assert "automountServiceAccountToken" in updated, updated


# ------------------------------------------------------------------------------------ the rewrite
def test_the_rewrite_spells_the_engine_names_in_the_api_servers():
    from webhook.outputs.vapcel import rewrite

    named = {"mounts": 'has(container.volumeMounts) ? container.volumeMounts : []'}
    out = rewrite('variables.mounts.exists(m, m.name == "pod") && template != containerName && '
                  'workload.kind == "Pod" && size(pod.volumes) > 0 && sign(quantity(x.cpu)) == 1', named)
    assert out == ('(has(container.volumeMounts) ? container.volumeMounts : []).exists(m, m.name == "pod") && '
                   'tpl.name != container.name && object.kind == "Pod" && size(tpl.spec.volumes) > 0 && '
                   'sign(quantity(string(x.cpu))) == 1')


@pytest.mark.parametrize("source, reason", [
    ("size(cluster.resourceQuotas) > 0", "reads cluster facts"),
    ('glob(container.image, "nvcr.io/*")', "calls glob(), an aiadmit extension"),
    ('workload.role == "training"', "aiadmit's workload role"),
    ("variables.missing", "does not declare"),
    ("[1].all(tpl, tpl > 0)", "the name `tpl`"),
])
def test_what_the_api_server_cannot_run_is_refused_with_its_reason(source, reason):
    from webhook.outputs.vapcel import NotExportable, rewrite

    with pytest.raises(NotExportable, match=re.escape(reason)):
        rewrite(source, {})
