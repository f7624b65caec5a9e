"""Policies and exceptions as cluster objects (language/objects.py, app/clusterobjects.py), without a cluster:
the objects are given to the bookkeeping as a list and a watch would give them; tests/e2e/test_cluster_objects_e2e.py
runs the same against a real API server, with RBAC."""

import copy
import os

import jsonschema
import pytest
import yaml

from webhook.app.clusterobjects import ClusterObjects
from webhook.language.objects import _SPEC_FIELDS, load_exception_object, load_policy_object, render
from webhook.model.resource import Resource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "policies", "team-label.yaml")
CRDS = {d["spec"]["names"]["kind"]: d for d in yaml.safe_load_all(open(os.path.join(ROOT, "manifests", "base",
                                                                                     "crds.yaml")))}


def stored(doc, uid="u-1", generation=1, namespace=None):
    """The document as the API server stores it: server metadata, managedFields, a status."""
    obj = copy.deepcopy(doc)
    meta = obj["metadata"]
    meta.update(uid=uid, generation=generation, resourceVersion="42", creationTimestamp="2026-12-02T18:00:00Z",
                managedFields=[{"manager": "kubectl", "operation": "Apply"}],
                annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"})
    if namespace:
        meta["namespace"] = namespace
    obj["status"] = {"conditions": []}
    return obj


def team_label(name="team-label", expression=None):
    doc = yaml.safe_load(open(EXAMPLE))
    doc["metadata"]["name"] = name
    if expression:
        doc["rules"][0]["expression"] = expression
    return doc


def exception(namespace, name="legacy", **spec):
    body = {"policies": ["team-label"], "reason": "legacy jobs", "requestedBy": "alice@example.com", **spec}
    return stored({"apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyException",
                   "metadata": {"name": name}, "spec": body}, uid=f"e-{namespace}-{name}", namespace=namespace)


def pod(namespace, name="train"):
    return Resource({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                     "spec": {"containers": [{"name": "main", "image": "img",
                                              "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})


def team_findings(engine, namespace, name="train"):
    return [f for f in engine.evaluate(pod(namespace, name)).findings if f.policy == "team-label"]


def test_a_policy_object_loads_less_the_metadata_the_api_server_adds():
    policy, problems = load_policy_object(stored(team_label()))
    assert problems == [] and policy.id == "team-label" and policy.source == "Policy/team-label"


def test_a_broken_policy_object_names_line_and_column_of_its_stored_form():
    obj = stored(team_label(expression="has(object.metadata.labels) && 1 + 'a' == 2"))
    policy, problems = load_policy_object(obj)
    assert policy is None and len(problems) == 1
    where, _, message = problems[0].partition(": ")
    name, line, column = where.split(":")
    assert name == "Policy/team-label" and "CEL does not compile" in message
    text = render(obj).splitlines()[int(line) - 1]  # the line `kubectl get -o yaml` shows (sorted keys)
    assert text.lstrip().startswith("- expression:") and text[int(column) - 1:].startswith("+ 'a'")  # at the operator, as cel-go
    assert "managedFields" not in render(obj) and "status" not in render(obj)


def test_a_policy_object_with_a_field_the_language_does_not_know_is_refused_at_it():
    doc = team_label()
    doc["actoin"] = "deny"
    _, problems = load_policy_object(stored(doc))
    assert problems == ["Policy/team-label:2:1: actoin: unknown field 'actoin'"]


def test_an_exception_object_covers_its_own_namespace_and_no_other():
    found, problems = load_exception_object(exception("team-a", match={"names": ["train*"], "kinds": ["Pod"]}),
                                            {"team-label"})
    assert problems == [] and found.namespaces == ("team-a",) and found.name == "team-a/legacy"
    assert found.covers("team-label", "team-a", "train-1", "Pod")
    assert not found.covers("team-label", "team-b", "train-1", "Pod")
    assert not found.covers("team-label", "team-a", "serve", "Pod")


@pytest.mark.parametrize("spec, expected", [
    ({"namespaces": ["*"]}, "spec.namespaces: unknown field"),
    ({"match": {"namespaces": ["team-b"]}}, "spec.match.namespaces: unknown field"),
    ({"policies": ["*"]}, "spec.policies.0: not a policy id: '*'"),
    ({"policies": ["no-such-policy"]}, "spec.policies.0: unknown policy 'no-such-policy'"),
    ({"requestedBy": " "}, "spec.requestedBy: required"),
    ({"expires": "next week"}, "spec.expires: not a date"),
])
def test_an_exception_object_that_would_reach_further_or_says_too_little_is_refused(spec, expected):
    found, problems = load_exception_object(exception("team-a", **spec), {"team-label"})
    assert found is None and len(problems) == 1 and expected in problems[0], problems
    assert problems[0].startswith("PolicyException/team-a/legacy:")


def test_the_engine_enforces_objects_and_one_bad_object_costs_only_itself():
    objects = ClusterObjects()
    objects.replace("Policy", [stored(team_label())])
    objects.replace("PolicyException", [exception("team-a")])
    engine = objects.engine(None, None, None)
    assert team_findings(engine, "team-b") and not team_findings(engine, "team-a")
    assert "resources-declared" in engine.by_id  # the files' policies are there too
    assert {k: c["status"] for k, c in objects.conditions().items()} == {
        "Policy/team-label": "True", "PolicyException/team-a/legacy": "True"}

    # generation 2 of the policy is broken, a second policy is good, an exception names a policy that is not there
    broken = stored(team_label(expression="object.metadata.labels.size( > 0"), generation=2)
    other = stored(team_label("team-label-copy"), uid="u-2")
    objects.replace("Policy", [broken, other])
    objects.replace("PolicyException", [exception("team-a"), exception("team-b", "bad", policies=["gone"])])
    engine = objects.engine(None, None, None)
    assert {"team-label", "team-label-copy"} <= set(engine.by_id)  # generation 1 is still enforced
    assert [f.policy for f in engine.evaluate(pod("team-b")).findings if f.policy.startswith("team-label")] \
        == ["team-label", "team-label-copy"]
    conditions = objects.conditions()
    assert conditions["Policy/team-label"]["status"] == "False"
    assert conditions["Policy/team-label"]["message"].startswith("Policy/team-label:")
    assert "generation 1 of this object keeps being enforced" in conditions["Policy/team-label"]["message"]
    assert conditions["Policy/team-label"]["observedGeneration"] == 2
    assert conditions["Policy/team-label-copy"]["status"] == "True"
    assert conditions["PolicyException/team-b/bad"]["status"] == "False"


def test_a_policy_object_cannot_replace_a_file_policy():
    objects = ClusterObjects()
    doc = team_label("resources-declared")
    objects.replace("Policy", [stored(doc)])
    objects.replace("PolicyException", [])
    engine = objects.engine(None, None, None)
    assert engine.by_id["resources-declared"].source.endswith("resources-declared.yaml")
    assert "is already defined in" in objects.conditions()["Policy/resources-declared"]["message"]


def test_revision_follows_generations_not_status_writes():
    objects = ClusterObjects()
    first = stored(team_label())
    objects.replace("Policy", [first])
    objects.wait(0)
    before = objects.revision()
    status_only = copy.deepcopy(first)
    status_only["status"] = {"conditions": [{"type": "Loaded", "status": "True"}]}
    status_only["metadata"]["resourceVersion"] = "43"
    objects.apply("MODIFIED", status_only)
    assert objects.revision() == before and not objects.wait(0)
    edited = copy.deepcopy(first)
    edited["metadata"]["generation"] = 2
    objects.apply("MODIFIED", edited)
    assert objects.revision() != before and objects.wait(0)
    objects.apply("DELETED", edited)
    assert objects.revision() == () and objects.wait(0)


def _openapi(schema):
    """The CRD's structural schema as JSON Schema (drop the Kubernetes extensions)."""
    if isinstance(schema, dict):
        return {k: _openapi(v) for k, v in schema.items() if not k.startswith("x-kubernetes")}
    if isinstance(schema, list):
        return [_openapi(v) for v in schema]
    return schema


def test_the_crds_accept_every_built_in_policy_and_name_the_exception_fields_aiadmit_reads():
    schema = _openapi(CRDS["Policy"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    folder = os.path.join(ROOT, "policies")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".yaml"):
            jsonschema.validate(yaml.safe_load(open(os.path.join(folder, name))), schema)
    jsonschema.validate(team_label(), schema)
    crd = CRDS["PolicyException"]
    assert crd["spec"]["scope"] == "Namespaced" and CRDS["Policy"]["spec"]["scope"] == "Cluster"
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert set(spec["properties"]) == _SPEC_FIELDS and "namespaces" not in spec["properties"]["match"]["properties"]
    for kind in CRDS.values():
        assert kind["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_the_offline_audit_reads_policies_and_exceptions_among_its_input_files(tmp_path):
    """The same objects as files in the input: enforced as the webhook would, a bad one named at file:line:col."""
    import subprocess
    import sys

    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(team_label(), sort_keys=False))
    pods = [pod("team-a", "legacy-1").obj, pod("team-b", "legacy-1").obj]
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump_all(pods))
    good = {k: v for k, v in exception("team-a").items() if k != "status"}
    (tmp_path / "exceptions.yaml").write_text(yaml.safe_dump(good, sort_keys=False))
    run = [sys.executable, "-m", "webhook", "audit", str(tmp_path), "--policy", "team-label", "--format", "json"]
    proc = subprocess.run(run, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1, proc.stderr
    import json

    denied = [(f["resource"]["namespace"], f["policy"]) for f in json.loads(proc.stdout)["findings"]
              if f["result"] == "fail"]
    assert denied == [("team-b", "team-label")], proc.stdout

    wide = copy.deepcopy(good)
    wide["metadata"]["name"] = "wide"
    wide["spec"]["namespaces"] = ["*"]
    (tmp_path / "wide.yaml").write_text(yaml.safe_dump(wide, sort_keys=False))
    proc = subprocess.run(run, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    line = next(li for li in (tmp_path / "wide.yaml").read_text().splitlines() if li.strip().startswith("namespaces"))
    number = (tmp_path / "wide.yaml").read_text().splitlines().index(line) + 1
    assert f"{tmp_path / 'wide.yaml'}:{number}:3: spec.namespaces: unknown field" in proc.stderr


def test_the_engine_with_objects_keeps_the_files_in_tree_policies_and_reuses_compiled_objects(tmp_path):
    import shutil

    from webhook.language.bundle import BUILTIN_POLICY_DIR

    shutil.copy(os.path.join(ROOT, "tests", "data", "vap", "defaulted-replicas.yaml"), tmp_path / "vap.yaml")
    objects = ClusterObjects()
    objects.apply("ADDED", stored(team_label()))
    first = objects.engine([BUILTIN_POLICY_DIR, str(tmp_path)], None, None)
    assert first.intree, "the in-tree ValidatingAdmissionPolicies of the files are enforced with the objects"
    objects.apply("ADDED", exception("team-a"))
    second = objects.engine([BUILTIN_POLICY_DIR, str(tmp_path)], None, None)
    # nothing of the policy changed: the same compiled policy (what the reports controller compares)
    assert second.by_id["team-label"] is first.by_id["team-label"] and second.intree is first.intree
    objects.apply("MODIFIED", stored(team_label(expression="true"), generation=2))
    assert objects.engine([BUILTIN_POLICY_DIR, str(tmp_path)], None, None).by_id["team-label"] is not \
        first.by_id["team-label"]
