"""The Kubernetes versions aiadmit follows (webhook/k8s/versions.py) and a policy's `kubernetesVersion`: the oldest
API server its CEL must stay portable to (default 1.35), refused at load with file:line:col when that server would
refuse it, while the run-time semantics stay 1.37's.

What each version's API server accepts was read from k8s.io/apiserver (pkg/cel/environment/base.go) and measured with
the Kubernetes CEL oracle built three ways on 2026-12-02: v0.37.2 (tests/tools/k8scel; test_k8scel_versions.py checks
it whenever Go is there), and, once, v0.36.2 and v0.34.4 (cel-go v0.26.0, the cel-go of 1.35 and 1.36):
- `[1].includes(1)`: v0.36.2 "undeclared reference to 'includes'", new and stored; v0.37.2 compiles it stored, and
  new only at compatibility version 1.37 (a 1.37 API server's default for new expressions is 1.36);
- `{"b-c": 1}.`b-c``: v0.36.2 and v0.34.4 "unsupported syntax: '`'", new and stored; v0.37.2 compiles it at every
  compatibility version (the parser is the binary's, not gated).
"""

from __future__ import annotations

import json
import os

import pytest

from webhook.cel.environment import CelError, Expression, new_context
from webhook.k8s import versions
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

POLICY = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: portable
summary: A test policy.
why: Because.
remediation: Fix it.
action: deny
{version}match:
  kinds: [Pod]
target: object
rules:
  - name: r
    expression: {expression}
    message: "found {{{{ {message} }}}}"
"""


def _load(tmp_path, expression: str, version: str | None = None, message: str = "1"):
    path = tmp_path / "p.yaml"
    path.write_text(POLICY.format(version=f"kubernetesVersion: {version}\n" if version else "",
                                  expression=json.dumps(expression), message=message))
    return load_policies([str(path)])[0], str(path)


def test_the_supported_range_the_reference_and_the_default():
    assert [v.name for v in versions.SUPPORTED] == ["1.35", "1.36", "1.37"]
    assert versions.REFERENCE.name == "1.37" and versions.REFERENCE.cel_go == "v0.29.2"
    assert versions.DEFAULT_PORTABILITY.name == "1.35"
    assert [versions.version(v.name).cel_go for v in versions.SUPPORTED] == ["v0.26.0", "v0.26.0", "v0.29.2"]
    # MutatingAdmissionPolicy: v1 and on by default from 1.36 (1.35: v1beta1, off)
    assert [v.mutating_admission_policy for v in versions.SUPPORTED] == [
        "", "admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1"]
    with pytest.raises(ValueError, match=r"Kubernetes '1.34' is not a supported version \(supported: 1.35, 1.36, "
                                         r"1.37; the reference is 1.37\)"):
        versions.version("1.34")


def test_the_policy_schema_allows_exactly_the_supported_versions():
    schema = json.load(open(os.path.join(ROOT, "policies", "policy.schema.json"), encoding="utf-8"))
    assert schema["properties"]["kubernetesVersion"]["enum"] == [v.name for v in versions.SUPPORTED]


@pytest.mark.parametrize("server, new, runs", [("1.35", False, False), ("1.36", False, False),
                                               ("1.37", False, True)])
def test_includes_is_gated_by_the_compatibility_version(server, new, runs):
    feature, version = versions.FEATURES["includes"], versions.version(server)
    assert (feature.accepted_new_by(version), feature.runs_on(version)) == (new, runs)


@pytest.mark.parametrize("server, accepted", [("1.35", False), ("1.36", False), ("1.37", True)])
def test_backquoted_field_names_come_with_the_1_37_parser(server, accepted):
    feature = versions.FEATURES["backquoted"]
    assert feature.accepted_new_by(versions.version(server)) is feature.runs_on(versions.version(server)) is accepted


def test_a_policy_without_kubernetes_version_is_portable_to_the_oldest(tmp_path):
    policy, _ = _load(tmp_path, "object.kind == 'Pod'")
    assert policy.kubernetes_version is versions.DEFAULT_PORTABILITY
    policy, _ = _load(tmp_path, "object.kind == 'Pod'", '"1.37"')
    assert policy.kubernetes_version.name == "1.37"


@pytest.mark.parametrize("version", [None, '"1.35"', '"1.36"', '"1.37"'])
def test_includes_fails_the_load_at_every_supported_version(tmp_path, version):
    """No supported API server accepts `includes` in a new ValidatingAdmissionPolicy (1.37 runs it only stored)."""
    with pytest.raises(PolicyLoadError) as info:
        _load(tmp_path, "[1, 2].includes(object.spec.x)", version)
    (problem,) = info.value.problems
    shown, line = (version or '"1.35"').strip('"'), 15 if version else 14
    assert problem.startswith(f"{tmp_path / 'p.yaml'}:{line}:25: rules[0].expression: rule r: CEL does not compile: "
                              f"not portable to Kubernetes {shown} (kubernetesVersion): "
                              f"`<list>.includes(<value>)` (Kubernetes' lists library, version 1) is Kubernetes "
                              f"1.37's (compatibility version 1.37): an API server accepts it in a new expression "
                              f"from 1.38"), problem
    assert ("runs it only in an expression already stored" in problem) == (shown == "1.37")


@pytest.mark.parametrize("version, loads", [(None, False), ('"1.35"', False), ('"1.36"', False), ('"1.37"', True)])
def test_backquoted_field_names_load_only_for_1_37(tmp_path, version, loads):
    if loads:
        policy, _ = _load(tmp_path, "object.metadata.labels.`app.kubernetes.io/name` == 'x'", version)
        assert policy.rules[0].expression.run({"object": {"metadata": {"labels": {"app.kubernetes.io/name": "x"}}}})
        return
    with pytest.raises(PolicyLoadError) as info:
        _load(tmp_path, "object.metadata.labels.`app.kubernetes.io/name` == 'x'", version)
    (problem,) = info.value.problems
    assert f":{15 if version else 14}:41: rules[0].expression: rule r: CEL does not compile: not portable to " \
           f"Kubernetes {(version or '1.35').strip(chr(34))} (kubernetesVersion)" in problem, problem
    assert "a backquoted field name (x.`b-c`) is accepted by Kubernetes 1.37's CEL parser (cel-go v0.29) and " \
           "later" in problem, problem


def test_the_check_covers_messages_and_reads_tokens_not_text(tmp_path):
    with pytest.raises(PolicyLoadError, match=r"rules\[0\]\.message: rule r: CEL in message does not compile: "
                                              r"not portable to Kubernetes 1.35"):
        _load(tmp_path, "true", message="[1].includes(1)")
    # a string, a field and a function of another name are no use of the feature
    policy, _ = _load(tmp_path, "'x.includes(1) and `quoted`' != object.kind && !has(object.includes)")
    assert policy.rules[0].expression.run({"object": {"kind": "Pod"}}) is True


def test_a_number_or_an_unsupported_version_is_a_clear_error(tmp_path):
    with pytest.raises(PolicyLoadError) as info:
        _load(tmp_path, "true", "1.36")
    assert info.value.problems == [f"{tmp_path / 'p.yaml'}:9:1: kubernetesVersion: 1.36 is not one of ['1.35', "
                                   f"'1.36', '1.37']: YAML read 1.36 as a number; quote it"]
    with pytest.raises(PolicyLoadError, match=r"p.yaml:9:1: kubernetesVersion: '1.34' is not one of"):
        _load(tmp_path, "true", '"1.34"')


@pytest.mark.parametrize("source, value", [
    # Kubernetes 1.37's answers (tests/data/k8s-cel-library/edge-cases.yaml has them from the oracle too)
    ("[1, 2, 3].includes(2.0)", True), ("[1].includes(1u)", True), ("{'a': 1}.includes('a')", False),
    ("'abc'.includes('abc')", True), ("'abc'.includes('a')", False), ("null.includes(null)", True),
    ("[].includes(null)", False), ("[[1, 2]].includes([1, 2])", True), ("[dyn(1), dyn('a')].includes('a')", True),
])
def test_run_time_semantics_are_1_37s(source, value):
    assert Expression(source).run(new_context()) is value


def test_lists_range_and_quantities_as_1_37():
    with pytest.raises(Exception, match="lists.range: size must be non-negative, got -1"):
        Expression("lists.range(-1)").run(new_context())
    # 1.37 fixed quantity add/sub mutating their receiver (1.36 answers false here); a quantity beyond a double's
    # precision keeps its exact value through sub
    assert Expression('[quantity("1e30")].all(q, q.add(q).isGreaterThan(q))').run(new_context()) is True
    assert Expression('[quantity("1e30")].all(q, q.sub(quantity("1")).isLessThan(q))').run(new_context()) is True
    with pytest.raises(CelError, match=r"includes\(\) is a method: write x.includes\(...\)"):
        Expression("includes([1], 1)")  # a method only, as in Kubernetes
