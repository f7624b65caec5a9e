"""Any ValidatingAdmissionPolicy, offline (issue 23 item 3): VAP + binding given as policies, run on the real CEL
evaluator as the API server's CREATE admission would (engine/vap.py, language/vapload.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from webhook.app.audit import audit_paths
from webhook.engine.core import Engine
from webhook.language.policy import PolicyLoadError

HEADER = "apiVersion: admissionregistration.k8s.io/v1\n"


def _policy(spec: str, name: str = "p.example.com") -> str:
    return (HEADER + f"kind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\nspec:\n"
            + textwrap.indent(textwrap.dedent(spec).strip("\n"), "  ") + "\n")


def _binding(actions: str = "[Deny]", extra: str = "", policy: str = "p.example.com", name: str = "b") -> str:
    return (HEADER + f"kind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: {name}}}\nspec:\n"
            f"  policyName: {policy}\n  validationActions: {actions}\n"
            + textwrap.indent(textwrap.dedent(extra).strip("\n"), "  ") + ("\n" if extra else ""))


DEPLOYMENTS = """\
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
"""


def _deployment(name: str, replicas: int, namespace: str = "default", labels: str = "{app: a}") -> str:
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: {name}, namespace: {namespace}, labels: {labels}}}
        spec:
          replicas: {replicas}
          selector: {{matchLabels: {{app: a}}}}
          template:
            metadata: {{labels: {{app: a}}}}
            spec:
              containers: [{{name: c, image: "nginx:1.27"}}]
        """)


def _audit(tmp_path, policies: list[str], objects: list[str]):
    policy_file = tmp_path / "vap.yaml"
    policy_file.write_text("---\n".join(policies))
    objects_file = tmp_path / "objects.yaml"
    objects_file.write_text("---\n".join(objects))
    engine = Engine.load([str(policy_file)])
    result = audit_paths(engine, [str(objects_file)])
    return {e.resource.name: e for e in result.evaluations}, result


REPLICAS = DEPLOYMENTS[2:].replace("\n  ", "\n") + """\
validations:
- expression: "object.spec.replicas <= 5"
  message: "replicas must be no greater than 5"
"""


def test_deny_message_and_position(tmp_path):
    by_name, result = _audit(tmp_path, [_policy(REPLICAS), _binding()],
                             [_deployment("ok", 2), _deployment("big", 7)])
    assert by_name["ok"].findings == [] and by_name["ok"].policies == ("p.example.com",)
    [finding] = by_name["big"].findings
    assert (finding.action, finding.result, finding.rule) == ("deny", "fail", "b/validations[0]")
    assert finding.message == ("ValidatingAdmissionPolicy 'p.example.com' with binding 'b' denied request: "
                               "replicas must be no greater than 5")
    assert finding.position() == (12, 1)  # the second document's own first line
    assert result.exit_code() == 1


@pytest.mark.parametrize("actions,expected", [("[Warn]", ["warn"]), ("[Audit]", ["audit"]),
                                              ("[Warn, Audit]", ["warn", "audit"])])
def test_validation_actions(tmp_path, actions, expected):
    by_name, result = _audit(tmp_path, [_policy(REPLICAS), _binding(actions)], [_deployment("big", 7)])
    assert [f.action for f in by_name["big"].findings] == expected
    assert by_name["big"].findings[0].message.startswith(
        "Validation failed for ValidatingAdmissionPolicy 'p.example.com' with binding 'b': ")
    assert result.exit_code() == 0


def test_message_expression_variables_and_default_message(tmp_path):
    spec = DEPLOYMENTS[2:].replace("\n  ", "\n") + """\
variables:
- {name: replicas, expression: "object.spec.replicas"}
- {name: over, expression: "variables.replicas > 3"}
validations:
- expression: "!variables.over"
  messageExpression: "'replicas ' + string(variables.replicas) + ' > 3'"
- expression: "object.metadata.name.size() < 3"
- expression: "false"
  message: static
  messageExpression: "string(1/0)"
"""
    by_name, _ = _audit(tmp_path, [_policy(spec), _binding()], [_deployment("big", 7)])
    messages = [f.message.split("denied request: ")[1] for f in by_name["big"].findings]
    assert messages == ["replicas 7 > 3", "failed expression: object.metadata.name.size() < 3", "static"]


@pytest.mark.parametrize("failure,expected", [("Fail", ["error"]), ("Ignore", [])])
def test_failure_policy_decides_an_error(tmp_path, failure, expected):
    spec = f"failurePolicy: {failure}\n" + DEPLOYMENTS[2:].replace("\n  ", "\n") + """\
validations:
- expression: "object.spec.missing.field == 1"
"""
    by_name, _ = _audit(tmp_path, [_policy(spec), _binding()], [_deployment("d", 1)])
    assert [f.result for f in by_name["d"].findings] == expected
    if expected:
        assert "resulted in error" in by_name["d"].findings[0].message and by_name["d"].findings[0].blocking


def test_match_conditions_and_object_selector(tmp_path):
    spec = DEPLOYMENTS[2:].replace("\n  ", "\n") + """\
matchConditions:
- {name: not-system, expression: "object.metadata.namespace != 'kube-system'"}
validations:
- expression: "false"
  message: "no"
"""
    binding = _binding(extra="matchResources:\n  objectSelector: {matchLabels: {checked: 'yes'}}")
    by_name, _ = _audit(tmp_path, [_policy(spec), binding],
                        [_deployment("sys", 1, "kube-system", "{checked: 'yes'}"),
                         _deployment("unlabelled", 1), _deployment("hit", 1, labels="{checked: 'yes'}")])
    assert by_name["sys"].findings == [] and by_name["unlabelled"].findings == []
    assert [f.result for f in by_name["hit"].findings] == ["fail"]


def test_resource_rules_group_and_exclusions(tmp_path):
    spec = """\
matchConstraints:
  resourceRules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  excludeResourceRules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], resourceNames: [spared]}
validations:
- expression: "false"
"""
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: default}\nspec: {containers: [{name: c, image: x}]}\n"
    by_name, _ = _audit(tmp_path, [_policy(spec), _binding()], [pod % "hit", pod % "spared", _deployment("dep", 1)])
    assert len(by_name["hit"].findings) == 1
    assert by_name["spared"].findings == [] and by_name["dep"].findings == []


def test_namespace_selector_from_the_input_and_unknown_namespace_skips(tmp_path):
    spec = DEPLOYMENTS[2:].replace("\n  ", "\n").replace("  resourceRules:", "  namespaceSelector: {matchLabels: {env: prod}}\n  resourceRules:") + """\
validations:
- expression: "object.spec.replicas >= 2"
"""
    namespaces = "apiVersion: v1\nkind: Namespace\nmetadata: {name: prod, labels: {env: prod}}\n---\n" \
                 "apiVersion: v1\nkind: Namespace\nmetadata: {name: dev, labels: {env: dev}}\n"
    by_name, _ = _audit(tmp_path, [_policy(spec), _binding()],
                        [namespaces, _deployment("p", 1, "prod"), _deployment("d", 1, "dev"),
                         _deployment("u", 1, "elsewhere")])
    assert [f.result for f in by_name["p"].findings] == ["fail"]
    assert by_name["d"].findings == []
    [skip] = by_name["u"].findings
    assert skip.result == "skip" and "namespace 'elsewhere' is not in the input" in skip.message


PARAMS = """\
paramKind: {apiVersion: v1, kind: ConfigMap}
""" + DEPLOYMENTS[2:].replace("\n  ", "\n") + """\
validations:
- expression: "object.spec.replicas <= int(params.data.max)"
  messageExpression: "'at most ' + params.data.max"
"""
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: limits, namespace: default}\ndata: {max: '3'}\n"


@pytest.mark.parametrize("ref,expected", [
    ("{name: limits, namespace: default, parameterNotFoundAction: Deny}", ["denied request: at most 3"]),
    ("{name: other, namespace: default, parameterNotFoundAction: Allow}", []),
    ("{name: other, namespace: default, parameterNotFoundAction: Deny}",
     ["denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"]),
    ("{selector: {}, parameterNotFoundAction: Deny}", ["denied request: at most 3"]),
])
def test_params_and_parameter_not_found_action(tmp_path, ref, expected):
    by_name, _ = _audit(tmp_path, [_policy(PARAMS), _binding(extra=f"paramRef: {ref}"), CONFIGMAP],
                        [_deployment("d", 5)])
    assert [f.message.split("with binding 'b' ")[1] for f in by_name["d"].findings] == expected


def test_authorizer_and_user_info_skip_with_a_reason(tmp_path):
    spec = DEPLOYMENTS[2:].replace("\n  ", "\n") + """\
variables:
- {name: user, expression: "request.userInfo.username"}
validations:
- expression: "authorizer.group('apps').resource('deployments').check('create').allowed()"
- expression: "request.userInfo.username != 'mallory'"
- expression: "variables.user != 'mallory'"
"""
    by_name, _ = _audit(tmp_path, [_policy(spec), _binding()], [_deployment("d", 1)])
    assert [f.result for f in by_name["d"].findings] == ["skip", "skip", "skip"]
    assert "authorizer" in by_name["d"].findings[0].message
    assert "userInfo" in by_name["d"].findings[1].message


def test_audit_annotations(tmp_path):
    spec = DEPLOYMENTS[2:].replace("\n  ", "\n") + """\
auditAnnotations:
- {key: high-replica-count, valueExpression: "'Deployment spec.replicas set to ' + string(object.spec.replicas)"}
"""
    spec = spec.replace("auditAnnotations:", "matchConditions:\n- {name: high, expression: 'object.spec.replicas > 3'}\nauditAnnotations:")
    by_name, _ = _audit(tmp_path, [_policy(spec), _binding("[Audit]")], [_deployment("big", 7), _deployment("s", 1)])
    [note] = by_name["big"].findings
    assert (note.action, note.message) == ("audit", "audit annotation p.example.com/high-replica-count: "
                                                    "Deployment spec.replicas set to 7")
    assert by_name["s"].findings == []


@pytest.mark.parametrize("spec,binding,expected", [
    ("validations:\n- expression: \"object.spec.replicas + 'a'\"", None, "vap.yaml:9:5: spec.validations[0].expression: must evaluate to bool, not string"),
    ("validations:\n- expression: \"params.x == 1\"", None, "spec.validations[0].expression: compilation failed: undeclared reference to 'params'"),
    ("validations:\n- expression: \"1\"", None, "must evaluate to bool, not int"),
    ("validations:\n- expression: \"object.spec.replicas - 'a' > 1\"", None, "spec.validations[0].expression: compilation failed: no matching overload for '-' applied to (dyn, string)"),
    ("validations:\n- expression: \"true\"", "[Block]", "must be Deny, Warn or Audit, not 'Block'"),
    ("validations:\n- expression: \"true\"", "[Deny, Warn]", "Deny and Warn may not be used together"),
    ("variables:\n- {name: 1, expression: \"1\"}\nvalidations:\n- expression: \"true\"", None,
     "spec.variables[0].name: a variable's name is required (a string)"),
])
def test_bad_policies_do_not_load_and_say_where(tmp_path, spec, binding, expected):
    text = _policy(DEPLOYMENTS[2:].replace("\n  ", "\n") + spec) + "---\n" + _binding(binding or "[Deny]")
    (tmp_path / "vap.yaml").write_text(text)
    with pytest.raises(PolicyLoadError) as caught:
        Engine.load([str(tmp_path / "vap.yaml")])
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


@pytest.mark.parametrize("match,expected", [
    ("{}", "spec.matchConstraints: resourceRules is required"),
    ("{resourceRules: [{apiGroups: [apps]}]}", "spec.matchConstraints.resourceRules[0]: operations must be a "
                                                "non-empty list of strings"),
])
def test_a_rule_that_could_match_nothing_does_not_load(tmp_path, match, expected):
    text = _policy(f"matchConstraints: {match}\nvalidations:\n- expression: 'false'") + "---\n" + _binding()
    (tmp_path / "vap.yaml").write_text(text)
    with pytest.raises(PolicyLoadError) as caught:
        Engine.load([str(tmp_path / "vap.yaml")])
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


def test_binding_to_a_policy_not_given_fails_load(tmp_path):
    (tmp_path / "vap.yaml").write_text(_binding(policy="absent.example.com"))
    with pytest.raises(PolicyLoadError) as caught:
        Engine.load([str(tmp_path / "vap.yaml")])
    assert "spec.policyName: no ValidatingAdmissionPolicy named 'absent.example.com' is given" in \
        caught.value.problems[0]


def test_cli_audit_and_test_with_extra_policies(tmp_path):
    (tmp_path / "vap.yaml").write_text(_policy(REPLICAS) + "---\n" + _binding())
    (tmp_path / "objects.yaml").write_text(_deployment("big", 7))
    run = subprocess.run([sys.executable, "-m", "webhook", "audit", "--extra-policies", "vap.yaml", "objects.yaml",
                          "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    assert ("objects.yaml:1:1: p.example.com [deny] ValidatingAdmissionPolicy 'p.example.com' with binding 'b' "
            "denied request: replicas must be no greater than 5") in run.stdout
    (tmp_path / "test.yaml").write_text(textwrap.dedent("""\
        apiVersion: aiadmit.dev/v1
        kind: PolicyTest
        metadata: {name: vap}
        policies: [vap.yaml]
        resources: [objects.yaml]
        cases:
          - {resource: {kind: Deployment, name: big}, policy: p.example.com, expect: fail,
             messageContains: "no greater than 5"}
        """))
    run = subprocess.run([sys.executable, "-m", "webhook", "test", "test.yaml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_an_update_review_gets_old_object_and_its_operation(tmp_path):
    import yaml

    from webhook.model.resource import Origin, Resource

    spec = """\
matchConstraints:
  resourceRules:
  - {apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments]}
validations:
- expression: "object.spec.replicas >= oldObject.spec.replicas && request.operation == 'UPDATE'"
  message: "no scaling down"
"""
    (tmp_path / "vap.yaml").write_text(_policy(spec) + "---\n" + _binding())
    engine = Engine.load([str(tmp_path / "vap.yaml")])
    new, old = yaml.safe_load(_deployment("d", 2)), yaml.safe_load(_deployment("d", 4))
    update = Resource(new, Origin(uid="u", operation="UPDATE", old_object=old))
    assert [f.message.rsplit(": ", 1)[1] for f in engine.evaluate(update).findings] == ["no scaling down"]
    create = Resource(new, Origin(uid="u", operation="CREATE"))
    assert engine.evaluate(create).findings == [] and engine.evaluate(create).policies == ()


def test_the_webhook_path_denies_by_a_vap_and_lowers_nothing(tmp_path):
    import json

    import yaml

    from serverproc import make_review
    from webhook.app import admission
    from webhook.inputs import review as reviews

    (tmp_path / "vap.yaml").write_text(_policy(REPLICAS) + "---\n" + _binding())
    engine = Engine.load([str(tmp_path / "vap.yaml")])
    big, small = yaml.safe_load(_deployment("big", 7)), yaml.safe_load(_deployment("big", 2))
    denied = admission.validate(engine, reviews.parse(json.dumps(make_review(big)).encode()))
    assert denied.outcome == "denied" and "replicas must be no greater than 5" in denied.response["status"]["message"]
    # An UPDATE that keeps the violation is still denied: the API server has no "already present" lowering
    update = admission.validate(engine, reviews.parse(json.dumps(make_review(big, "UPDATE", big)).encode()))
    assert update.outcome == "denied"
    assert admission.validate(engine, reviews.parse(json.dumps(make_review(small)).encode())).outcome == "allowed"



def test_the_in_tree_policies_stop_at_the_deadline_too(tmp_path):
    """The webhook's budget covers the user's ValidatingAdmissionPolicies as it covers aiadmit's own policies."""
    import time

    import yaml

    from webhook.engine.deadline import BudgetExceeded
    from webhook.model.resource import Resource

    (tmp_path / "vap.yaml").write_text(_policy(REPLICAS) + "---\n" + _binding())
    engine = Engine.load([str(tmp_path / "vap.yaml")])
    big = Resource(yaml.safe_load(_deployment("big", 7)))
    assert engine.evaluate(big, deadline=time.monotonic() + 60).findings  # in time: the VAP's denial
    with pytest.raises(BudgetExceeded):
        engine.evaluate(big, deadline=time.monotonic() - 1)
