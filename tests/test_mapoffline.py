"""Any MutatingAdmissionPolicy, offline (issue 23 item 3): MAP + binding given as policies, the object patched as
kube-apiserver v1.37.2 patches it (language/mapload.py, engine/mapeval.py, cel/messages.py, model/rfc6902.py,
k8s/applymerge.py), reported by the audit, written by `aiadmit fix`, asserted by `aiadmit test`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from webhook.app.audit import audit_paths
from webhook.cel.checker import DYN
from webhook.cel.environment import Activation, CelError, Expression
from webhook.cel.messages import MESSAGES
from webhook.engine import mapeval
from webhook.engine.core import Engine
from webhook.k8s import applymerge, applyschema_make
from webhook.language.policy import PolicyLoadError
from webhook.model import rfc6902
from webhook.model.facts import NoFacts
from webhook.model.resource import Origin, Resource

HEADER = "apiVersion: admissionregistration.k8s.io/v1\n"
PODS = """\
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
"""
POD = textwrap.dedent("""\
    apiVersion: v1
    kind: Pod
    metadata:
      name: app
      namespace: default
      labels: {app: a}
    spec:
      initContainers:
      - name: init
        image: example/init:v1
      containers:
      - name: app
        image: example/app:v1
    """)


def _map(mutations: str, extra: str = "", name: str = "p.example.com", match: str = PODS) -> str:
    spec = match + "  reinvocationPolicy: Never\n" + textwrap.indent(textwrap.dedent(extra).strip("\n"), "  ") \
        + ("\n" if extra else "") + ("  mutations: []" if mutations == "[]" else "  mutations:\n"
                                      + textwrap.indent(textwrap.dedent(mutations).strip("\n"), "  "))
    return HEADER + f"kind: MutatingAdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n{spec}\n"


def _binding(policy: str = "p.example.com", name: str = "b", extra: str = "") -> str:
    return (HEADER + f"kind: MutatingAdmissionPolicyBinding\nmetadata: {{name: {name}}}\nspec:\n"
            f"  policyName: {policy}\n" + textwrap.indent(textwrap.dedent(extra).strip("\n"), "  ")
            + ("\n" if extra else ""))


def _jsonpatch(expression: str) -> str:
    return f"- patchType: JSONPatch\n  jsonPatch:\n    expression: {json.dumps(expression)}\n"


def _apply(expression: str) -> str:
    return f"- patchType: ApplyConfiguration\n  applyConfiguration:\n    expression: {json.dumps(expression)}\n"


def _engine(tmp_path, *docs: str) -> Engine:
    path = tmp_path / "map.yaml"
    path.write_text("---\n".join(docs))
    return Engine.load([str(path)])


def _patched(engine: Engine, text: str = POD, redefault: bool = True):
    import yaml
    resource = Resource(yaml.safe_load(text), Origin(file="pod.yaml"))
    return mapeval.mutate(engine.intree, resource, NoFacts(), redefault=redefault)


# ------------------------------------------------------------------ the CEL of a mutation
DECLARED = {"object": DYN, MESSAGES: True}


def test_message_construction_parses_checks_and_runs():
    expression = Expression('[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey("a.io/b~c"), '
                            'value: Object.metadata.labels{?x: optional.none(), y: "1"}.y}]', None, None, DECLARED)
    assert str(expression.type) == "('list', JSONPatch)"
    [patch] = expression.run(Activation(object={}))
    assert (patch.type_name, dict(patch)) == ("JSONPatch", {"op": "add", "path": "/metadata/labels/a.io~1b~0c",
                                                            "value": "1"})
    nested = Expression('Object{spec: Object.spec{containers: [Object.spec.containers{name: "c"}]}}', None, None,
                        DECLARED)
    assert nested.run(Activation(object={})) == {"spec": {"containers": [{"name": "c"}]}}
    assert Expression('has(Object{a: 1}.a) && !has(Object{}.a)', None, None, DECLARED).run(Activation()) is True


@pytest.mark.parametrize("source, error", [
    ('[JSONPatch{op: "add", path: "/a", foo: 1}]', "expected type of field 'foo' is '' but provided type is 'int'"),
    ('[JSONPatch{op: 1, path: "/a"}]', "expected type of field 'op' is 'string' but provided type is 'int'"),
    ('[JSONPatch{op: "add", op: "remove"}]', "field 'op' is set twice"),
    ('[x.y{a: 1}]', "undeclared reference to 'x.y'"),
    ('[f(){a: 1}]', "a message is constructed from a type name"),
])
def test_message_construction_errors_at_load(source, error):
    with pytest.raises(CelError, match=error.replace("(", r"\(").replace(")", r"\)")):
        Expression(source, None, None, dict(DECLARED, x=DYN))


def test_messages_are_declared_only_in_mutations():
    with pytest.raises(CelError, match="undeclared reference to 'JSONPatch'"):
        Expression('[JSONPatch{op: "add"}]', None, None, {"object": DYN})


def test_a_dyn_op_is_checked_when_the_message_is_built():
    expression = Expression('[JSONPatch{op: dyn(1), path: "/a"}]', None, None, DECLARED)
    with pytest.raises(Exception, match="unexpected type int for JSONPatchType 'op' field"):
        expression.run(Activation())


# ------------------------------------------------------------------ JSON Patch as evanphx/json-patch v4 applies it
DOC = {"a": {"b": [1, 2, 3]}, "c": "x"}


@pytest.mark.parametrize("operations, expected", [
    ([{"op": "add", "path": "/a/b/-", "value": 4}], {"a": {"b": [1, 2, 3, 4]}, "c": "x"}),
    ([{"op": "add", "path": "/a/b/0", "value": 0}], {"a": {"b": [0, 1, 2, 3]}, "c": "x"}),
    ([{"op": "add", "path": "/a/b/-1", "value": 9}], {"a": {"b": [1, 2, 3, 9]}, "c": "x"}),  # -1 of len + 1: appends
    ([{"op": "add", "path": "/a/b/-2", "value": 9}], {"a": {"b": [1, 2, 9, 3]}, "c": "x"}),
    ([{"op": "replace", "path": "/a/b/-1", "value": 9}], {"a": {"b": [1, 2, 9]}, "c": "x"}),
    ([{"op": "replace", "path": "/d", "value": "y"}], {"a": {"b": [1, 2, 3]}, "c": "x", "d": "y"}),  # sets it
    ([{"op": "remove", "path": "/a/b/-1"}], {"a": {"b": [1, 2]}, "c": "x"}),
    ([{"op": "replace", "path": "/c", "value": "y"}], {"a": {"b": [1, 2, 3]}, "c": "y"}),
    ([{"op": "move", "from": "/c", "path": "/d"}], {"a": {"b": [1, 2, 3]}, "d": "x"}),
    ([{"op": "copy", "from": "/c", "path": "/a/e"}], {"a": {"b": [1, 2, 3], "e": "x"}, "c": "x"}),
    ([{"op": "test", "path": "/missing"}, {"op": "add", "path": "/t", "value": 1}],  # no value: holds
     {"a": {"b": [1, 2, 3]}, "c": "x", "t": 1}),
])
def test_json_patch_operations(operations, expected):
    assert rfc6902.apply(DOC, operations) == expected
    assert DOC == {"a": {"b": [1, 2, 3]}, "c": "x"}  # never changed in place


@pytest.mark.parametrize("operation, error", [
    ({"op": "add", "path": "/x/y", "value": 1}, "add operation does not apply: doc is missing path"),
    ({"op": "replace", "path": "/a/b/7", "value": 1}, "replace operation does not apply: doc is missing key: /a/b/7"),
    ({"op": "remove", "path": "/x"}, "error in remove for path: '/x': Unable to remove nonexistent key: x: missing"),
    ({"op": "test", "path": "/x/y", "value": 1}, "test operation does not apply: is missing path: /x/y"),
    ({"op": "move", "from": "/x", "path": "/y"}, "error in move for path: 'x': Unable to remove nonexistent key"),
    ({"op": "add", "path": "", "value": 1}, 'add operation does not apply: doc is missing path: ""'),
    ({"op": "add", "path": "/a/b/7", "value": 1}, "Unable to access invalid index: 7"),
    ({"op": "merge", "path": "/a"}, "Unexpected kind: merge"),
    ({"op": "add", "path": "a", "value": 1}, 'doc is missing path: "a"'),
])
def test_json_patch_errors(operation, error):
    with pytest.raises(rfc6902.PatchError, match=error):
        rfc6902.apply(DOC, [operation])


@pytest.mark.parametrize("operation", [{"op": "test", "path": "/c", "value": "y"},
                                       {"op": "test", "path": "/missing", "value": None}])  # null is a value
def test_a_failed_test_is_its_own_error(operation):
    with pytest.raises(rfc6902.TestFailed):
        rfc6902.apply(DOC, [operation])


# ------------------------------------------------------------------ server-side apply's merge
LIVE = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "a", "image": "i", "env": [{"name": "X", "value": "1"}]},
                                {"name": "b", "image": "j"}]}}


def test_apply_merges_list_maps_by_their_keys():
    merged = applymerge.apply(LIVE, {"metadata": {"labels": {"b": "2"}}, "spec": {"containers": [
        {"name": "b", "env": [{"name": "Y", "value": "2"}]}, {"name": "c", "image": "k"}]}}, "v1", "Pod")
    assert merged["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert [c["name"] for c in merged["spec"]["containers"]] == ["a", "b", "c"]
    assert merged["spec"]["containers"][1] == {"name": "b", "image": "j", "env": [{"name": "Y", "value": "2"}]}
    assert merged["spec"]["containers"][0] == LIVE["spec"]["containers"][0]


def test_apply_orders_a_new_item_after_the_one_it_follows_in_the_configuration():
    merged = applymerge.apply(LIVE, {"spec": {"containers": [{"name": "a"}, {"name": "new"}, {"name": "b"}]}},
                              "v1", "Pod")
    assert [c["name"] for c in merged["spec"]["containers"]] == ["a", "new", "b"]


@pytest.mark.parametrize("configuration, path", [
    ({"spec": {"tolerations": [{"key": "k"}]}}, ".spec.tolerations"),  # x-kubernetes-list-type: atomic
    ({"spec": {"containers": [{"name": "a", "args": ["x"]}]}}, ".spec.containers[0].args"),
    ({"spec": {"nodeSelector": {"a": "b"}, "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}}},
     ".spec.nodeSelector, .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, "
     ".spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),  # atomic maps
])
def test_apply_refuses_atomic_lists_maps_and_structs(configuration, path):
    with pytest.raises(applymerge.MergeError, match="may not mutate atomic arrays, maps or structs: " + path.replace(
            "[", r"\[").replace("]", r"\]")):
        applymerge.apply(LIVE, configuration, "v1", "Pod")


def test_apply_on_an_unknown_kind_merges_maps_and_refuses_lists():
    live = {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"a": 1}}
    assert applymerge.apply(live, {"spec": {"b": 2}}, "example.com/v1", "Widget")["spec"] == {"a": 1, "b": 2}
    with pytest.raises(applymerge.MergeError, match=r"atomic arrays, maps or structs: \.spec\.items"):
        applymerge.apply(live, {"spec": {"items": [1]}}, "example.com/v1", "Widget")


@pytest.mark.skipif(not os.path.isdir(applyschema_make.ROOT), reason="the v1.37.2 OpenAPI spec (Go module cache) "
                    "is not on this machine")
def test_the_apply_schema_is_what_the_openapi_spec_gives():
    with open(applyschema_make.OUT, encoding="utf-8") as handle:
        assert json.load(handle) == applyschema_make.build(), "run python3 -m webhook.k8s.applyschema_make"


# ------------------------------------------------------------------ policies on objects
SIDECAR = ('[JSONPatch{op: "add", path: "/spec/initContainers/-", value: Object.spec.initContainers{name: '
           '"mesh-proxy", image: "mesh/proxy:v1.0.0", restartPolicy: "Always"}}]')


def test_json_patch_policy_patches_the_defaulted_object_and_defaults_again(tmp_path):
    engine = _engine(tmp_path, _map(_jsonpatch(SIDECAR)), _binding())
    outcome = _patched(engine)
    added = outcome.patched["spec"]["initContainers"][1]
    assert added["name"] == "mesh-proxy" and added["restartPolicy"] == "Always"
    assert added["imagePullPolicy"] == "IfNotPresent" and added["terminationMessagePath"] == "/dev/termination-log"
    assert outcome.patched["spec"]["dnsPolicy"] == "ClusterFirst"  # defaulted before the policy
    assert [(p, b) for p, b, *_ in outcome.steps] == [("p.example.com", "b")]


def test_apply_configuration_policy(tmp_path):
    engine = _engine(tmp_path, _map(_apply('Object{metadata: Object.metadata{labels: {"injected": "yes"}}, spec: '
                                           'Object.spec{containers: [Object.spec.containers{name: "app", '
                                           'workingDir: "/w"}]}}')), _binding())
    patched = _patched(engine).patched
    assert patched["metadata"]["labels"] == {"app": "a", "injected": "yes"}
    assert patched["spec"]["containers"][0]["workingDir"] == "/w"
    assert patched["spec"]["containers"][0]["image"] == "example/app:v1"


@pytest.mark.parametrize("failure, denied", [("Fail", True), ("Ignore", False)])
def test_failure_policy_decides_a_patch_that_does_not_apply(tmp_path, failure, denied):
    engine = _engine(tmp_path, _map(_jsonpatch('[JSONPatch{op: "remove", path: "/metadata/labels/nothing"}]'),
                                    f"failurePolicy: {failure}"), _binding())
    outcome = _patched(engine)
    assert bool(outcome.denied) is denied
    if denied:
        assert outcome.denied[0][2] == (
            "policy 'p.example.com' with binding 'b' denied request: JSON Patch: error in remove for path: "
            "'/metadata/labels/nothing': Unable to remove nonexistent key: nothing: missing value")


def test_a_failed_test_operation_leaves_the_object_unpatched(tmp_path):
    engine = _engine(tmp_path, _map(_jsonpatch('[JSONPatch{op: "test", path: "/metadata/name", value: "other"}, '
                                               'JSONPatch{op: "add", path: "/metadata/labels/x", value: "1"}]')),
                     _binding())
    outcome = _patched(engine)
    assert outcome.denied == [] and outcome.steps == [] and "x" not in outcome.patched["metadata"]["labels"]


def test_type_names_must_follow_the_field_path(tmp_path):
    engine = _engine(tmp_path, _map(_apply('Object{spec: Object.spec{securityContext: Object.spec.wrong{}}}')),
                     _binding())
    [(_, _, message)] = _patched(engine).denied
    assert message == ("policy 'p.example.com' with binding 'b' denied request: "
                       'type mismatch: unexpected type name "Object.spec.wrong", expected '
                       '"Object.spec.securityContext", which matches field name path from root Object type')


def test_match_conditions_params_and_binding_selectors(tmp_path):
    param = textwrap.dedent("""\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: sidecar, namespace: default}
        data: {image: "mesh/proxy:v2"}
        """)
    engine = _engine(tmp_path, _map(_jsonpatch('[JSONPatch{op: "add", path: "/metadata/labels/proxy", '
                                               'value: params.data.image.split(":")[1]}]'),
                                    "paramKind: {apiVersion: v1, kind: ConfigMap}\nmatchConditions:\n"
                                    "- {name: labelled, expression: 'has(object.metadata.labels.app)'}"),
                     _binding(extra="paramRef: {name: sidecar, parameterNotFoundAction: Deny}\n"
                                    "matchResources: {objectSelector: {matchLabels: {app: a}}}"), param)
    assert _patched(engine).patched["metadata"]["labels"]["proxy"] == "v2"
    assert _patched(engine, POD.replace("labels: {app: a}", "labels: {app: b}")).steps == []


def test_audit_names_the_fields_a_policy_would_change(tmp_path):
    engine = _engine(tmp_path, _map(_jsonpatch(SIDECAR)), _binding())
    (tmp_path / "pod.yaml").write_text(POD)
    [evaluation] = audit_paths(engine, [str(tmp_path / "pod.yaml")]).evaluations
    [finding] = evaluation.findings
    assert (finding.policy, finding.rule, finding.action, finding.position()) == ("p.example.com", "b/mutations",
                                                                                 "audit", (1, 1))
    assert finding.message == ("MutatingAdmissionPolicy 'p.example.com' with binding 'b' would change "
                               "spec.initContainers")


def test_fix_writes_what_the_policy_adds_and_nothing_the_api_server_defaults(tmp_path):
    engine_file = tmp_path / "map.yaml"
    engine_file.write_text("---\n".join([_map(_jsonpatch(SIDECAR), "matchConditions:\n- {name: once, expression: "
                                                        "'!object.spec.initContainers.exists(c, c.name == \"mesh-proxy\")'}"),
                                         _binding()]))
    pod = tmp_path / "pod.yaml"
    pod.write_text("# the app\n" + POD)
    command = [sys.executable, "-m", "webhook", "fix", "--policies", str(engine_file), str(pod)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert pod.read_text() == "# the app\n" + POD.replace("    image: example/init:v1\n", (
        "    image: example/init:v1\n  - name: mesh-proxy\n    image: mesh/proxy:v1.0.0\n    restartPolicy: Always\n"))
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "0 changed" in again.stdout + again.stderr


def test_policy_test_asserts_the_patch(tmp_path):
    (tmp_path / "map.yaml").write_text("---\n".join([_map(_jsonpatch(SIDECAR)), _binding()]))
    (tmp_path / "pod.yaml").write_text(POD)
    (tmp_path / "map_test.yaml").write_text(textwrap.dedent("""\
        apiVersion: aiadmit.dev/v1
        kind: PolicyTest
        metadata: {name: sidecar}
        policies: [map.yaml]
        resources: [pod.yaml]
        cases:
          - resource: {kind: Pod, name: app}
            policy: p.example.com
            expect: fail
            action: audit
            patch:
              - {op: add, path: /spec/initContainers/-, value: {name: mesh-proxy, image: "mesh/proxy:v1.0.0",
                                                               restartPolicy: Always}}
        """))
    run = subprocess.run([sys.executable, "-m", "webhook", "test", str(tmp_path / "map_test.yaml")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


# ------------------------------------------------------------------ what does not load
@pytest.mark.parametrize("mutations, extra, expected", [
    ("[]", "", ":9:3: spec.mutations: mutations must contain at least one item"),
    ("- jsonPatch: {expression: '[]'}", "", "patchType is required"),
    ("- {patchType: Merge, jsonPatch: {expression: '[]'}}", "", "patchType must be JSONPatch or ApplyConfiguration"),
    ("- {patchType: JSONPatch, applyConfiguration: {expression: 'Object{}'}}", "",
     "jsonPatch is required when patchType is JSONPatch"),
    # the API server's answers (kube-apiserver v1.37.2, a create of each): a JSONPatch mutation must give exactly a
    # list(JSONPatch), an ApplyConfiguration exactly an Object
    (_jsonpatch('"x"'), "", "must evaluate to list(JSONPatch) but got string"),
    (_jsonpatch('[]'), "", "must evaluate to list(JSONPatch) but got list(dyn)"),
    (_jsonpatch('dyn([])'), "", "must evaluate to list(JSONPatch) but got dyn"),
    (_jsonpatch('[1]'), "", "must evaluate to list(JSONPatch) but got list(int)"),
    (_apply('[JSONPatch{op: "add", path: "/x"}]'), "", "must evaluate to Object but got list(JSONPatch)"),
    (_apply('{"data": {"a": "b"}}'), "", "must evaluate to Object but got map(string, map(string, string))"),
    (_apply('Object.spec{}'), "", "must evaluate to Object but got Object.spec"),
    (_jsonpatch('[JSONPatch{op: "add", path: "/x", value: "1", foo: "2"}]'), "",
     ":12:78: spec.mutations[0].jsonPatch.expression: compilation failed: expected type of field 'foo' is '' but "
     "provided type is 'string'"),
    (_jsonpatch('[JSONPatch{op: "add", path: jsonpatch.escapeKey(1)}]'), "", "no matching overload"),
    ("- {patchType: JSONPatch, jsonPatch: {expression: '[JSONPatch{op: \"add\"}]'}, validations: []}", "",
     "strict decoding error: unknown field 'validations'"),
    (_jsonpatch('[JSONPatch{op: "add", path: params.x}]'), "", "undeclared reference to 'params'"),
    (_jsonpatch('[JSONPatch{op: "add", path: "/x"}]'), "reinvocationPolicy: Sometimes",
     "reinvocationPolicy must be Never or IfNeeded"),
    (_jsonpatch('variables.v'), "variables:\n- {name: v, expression: '[JSONPatch{op: \"add\"}]'}",
     "undeclared reference to 'JSONPatch'"),
    (_jsonpatch('variables.v'), "variables:\n- {name: v, expression: '1'}", "must evaluate to list(JSONPatch) but got"),
    (_jsonpatch('[JSONPatch{op: "add", path: "/x"}]'), "", "unsupported value 'DELETE'"),
])
def test_bad_policies_do_not_load_and_say_where(tmp_path, mutations, extra, expected):
    text = _map(mutations, extra)
    if "DELETE" in expected:
        text = text.replace("operations: [CREATE]", "operations: [CREATE, DELETE]")
    if "reinvocationPolicy: Sometimes" in extra:
        text = text.replace("  reinvocationPolicy: Never\n", "")
    with pytest.raises(PolicyLoadError) as raised:
        _engine(tmp_path, text, _binding())
    assert expected in str(raised.value)
    assert str(tmp_path / "map.yaml") + ":" in str(raised.value)


@pytest.mark.parametrize("expression", ['true ? [JSONPatch{op: "add", path: "/x", value: 1}] : []',
                                        '[JSONPatch{op: "add", path: "/x", value: Object.data{x: "1"}.x}]'])
def test_what_the_api_server_accepts_loads(tmp_path, expression):
    assert _engine(tmp_path, _map(_jsonpatch(expression)), _binding()).intree.mutating


def test_a_binding_to_no_policy_and_validation_actions_do_not_load(tmp_path):
    with pytest.raises(PolicyLoadError) as raised:
        _engine(tmp_path, _map(_jsonpatch("[]")), _binding(policy="other"),
                _binding(name="c", extra="validationActions: [Deny]"))
    assert "no MutatingAdmissionPolicy named 'other' is given" in str(raised.value)
    assert "strict decoding error: unknown field 'validationActions'" in str(raised.value)


def test_the_webhook_leaves_maps_to_the_api_server(tmp_path):
    """A webhook started with MAPs among its --policies neither denies by them nor patches by them: the API server
    runs a cluster's MAPs itself, before the webhooks."""
    import yaml

    from serverproc import make_review
    from webhook.app import admission
    from webhook.inputs import review as reviews

    engine = _engine(tmp_path, _map(_jsonpatch('[JSONPatch{op: "replace", path: "/spec/missing", value: 1}]')),
                     _binding(), _map(_jsonpatch(SIDECAR), name="q.example.com"), _binding("q.example.com", "c"))
    review = reviews.parse(json.dumps(make_review(yaml.safe_load(POD))).encode())
    assert admission.validate(engine, review).outcome == "allowed"
    assert "patch" not in admission.mutate(engine, reviews.parse(json.dumps(make_review(
        yaml.safe_load(POD))).encode())).response
    assert {f.action for f in engine.evaluate(Resource(yaml.safe_load(POD))).findings} == {"deny", "audit"}


def test_maps_stop_at_the_deadline_too(tmp_path):
    import time

    from webhook.engine.deadline import BudgetExceeded

    import yaml

    engine = _engine(tmp_path, _map(_jsonpatch(SIDECAR)), _binding())
    resource = Resource(yaml.safe_load(POD))
    assert mapeval.mutate(engine.intree, resource, NoFacts(), deadline=time.monotonic() + 60).steps
    with pytest.raises(BudgetExceeded):
        mapeval.mutate(engine.intree, resource, NoFacts(), deadline=time.monotonic() - 1)


# ------------------------------------------------------------------ load, as the API server's create answers
CREATED = json.load(open(os.path.join(os.path.dirname(__file__), "data", "map", "create-answers.json"),
                         encoding="utf-8"))


@pytest.mark.parametrize("case", CREATED, ids=[c["name"] for c in CREATED])
def test_what_the_api_server_refuses_at_create_does_not_load(tmp_path, case):
    """tests/data/map/create-answers.json: kube-apiserver v1.37.2's answer to a create of each document (re-checked
    by tests/e2e/test_map_create_e2e.py); aiadmit loads exactly those it accepts. A binding is loaded beside a
    policy `a` the API server accepts (aiadmit refuses a binding to a policy it is not given)."""
    import yaml

    accepted = next(c["document"] for c in CREATED if c["name"] == "value-any")
    docs = [case["document"]] if case["document"]["kind"] == "MutatingAdmissionPolicy" else [
        accepted, case["document"]]
    if docs[0]["kind"] == "MutatingAdmissionPolicy" and len(docs) == 1:
        docs.append({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
                     "metadata": {"name": "b"}, "spec": {"policyName": case["document"]["metadata"]["name"]}})
    (tmp_path / "map.yaml").write_text(yaml.safe_dump_all(docs))
    if case["refused"]:
        with pytest.raises(PolicyLoadError):
            Engine.load([str(tmp_path / "map.yaml")])
    else:
        assert Engine.load([str(tmp_path / "map.yaml")]).intree.mutating
