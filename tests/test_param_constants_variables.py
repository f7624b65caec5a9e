"""A param that reaches a typed function (a regex, quantity(), ...) through a policy's named `variables` entry is
checked at load as if the expression named the param itself: reported once, at the param's own line in the policy
(or in the config file that overrides it), and the variable or rule it broke adds no follow-on errors.

Before, `variables: [{name: pattern, expression: params.pattern}]` and `matches(variables.pattern)` loaded, and a
non-RE2 pattern became an evaluation error on every workload, at the manifest's line (issue 26)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from testdata import ROOT
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

POLICY = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: image-registry
summary: Images come from the team's registry.
why: Provenance.
remediation: Use the registry.
action: deny
match:
  anyClasses: [ai]
target: container
params:
  pattern: "{pattern}"
  registries: ["^ok/", "{pattern}"]
  size: "{size}"
variables:
  - name: allowed
    expression: params.pattern
  - name: alsoAllowed
    expression: variables.allowed
  - name: registries
    expression: params.registries
  - name: size
    expression: "true ? params.size : '1Gi'"
rules:
{rules}
"""
PATTERN_LINE, REGISTRY_LINE, SIZE_LINE = 13, 14, 15
GOOD = {"pattern": "^registry[.]example/", "size": "8Gi"}
BAD = {"pattern": "^(?!docker.io)", "size": "8 Gi"}

RULES = {
    "a variable holding the param": ("""\
  - name: from-registry
    expression: container.image.matches(variables.allowed)
    message: "{{container.name}} image from elsewhere"
  - name: found
    expression: container.image.find(variables.allowed) != ''
    message: "{{container.name}} image from elsewhere\"""", PATTERN_LINE, "param pattern: invalid regular expression",
                                      "rule from-registry's expression"),
    "a variable holding that variable": ("""\
  - name: from-registry
    expression: container.image.matches(variables['alsoAllowed'])
    message: "{{container.name}} image from elsewhere\"""", PATTERN_LINE, "param pattern: invalid regular expression",
                                         "rule from-registry's expression"),
    "a comprehension over a variable holding a param list": ("""\
  - name: from-registry
    expression: variables.registries.exists(r, container.image.matches(r))
    message: "{{container.name}} image from elsewhere\"""", REGISTRY_LINE,
                                                             "param registries[1]: invalid regular expression",
                                                             "rule from-registry's expression"),
    "a quantity in a messageExpression": ("""\
  - name: sized
    expression: has(container.resources)
    message: "{{container.name}} has no resources"
    messageExpression: "'needs ' + string(quantity(variables.size).asApproximateFloat())\"""", SIZE_LINE,
                                          "param size: invalid quantity() argument",
                                          "rule sized's messageExpression"),
}


def load_problems(tmp_path, text: str) -> list[str]:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    try:
        load_policies([str(path)])
    except PolicyLoadError as exc:
        return [problem.replace(str(path), "POLICY") for problem in exc.problems]
    return []


def aiadmit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


@pytest.mark.parametrize("how", sorted(RULES))
def test_a_param_read_through_a_named_variable_is_checked_at_load_at_its_own_line_once(tmp_path, how):
    rules, line, words, user = RULES[how]
    problems = load_problems(tmp_path, POLICY.format(rules=rules, **BAD))
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"POLICY:{line}:") and words in problems[0], problems
    assert f"(used by {user})" in problems[0], problems
    assert load_problems(tmp_path, POLICY.format(rules=rules, **GOOD)) == []


def test_a_variable_whose_own_call_is_broken_by_the_param_is_one_error_not_a_cascade(tmp_path):
    text = POLICY.format(rules="""\
  - name: from-registry
    expression: variables.fromRegistry
    message: "{{container.name}} image from elsewhere"
  - name: also
    expression: variables.fromRegistry || container.name == 'x'
    message: "{{container.name}} image from elsewhere\"""", **BAD).replace(
        "rules:\n", "  - name: fromRegistry\n    expression: container.image.matches(variables.allowed)\nrules:\n")
    problems = load_problems(tmp_path, text)
    assert len(problems) == 1, problems  # not also `variables has no field 'fromRegistry'` twice
    assert problems[0].startswith(f"POLICY:{PATTERN_LINE}:") and "(used by variable fromRegistry)" in problems[0]


def test_a_config_override_read_through_a_named_variable_is_reported_in_the_config_file(tmp_path):
    policy, config = tmp_path / "policy.yaml", tmp_path / "config.yaml"
    policy.write_text(POLICY.format(rules=RULES["a variable holding that variable"][0], **GOOD))
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\npolicies:\n  image-registry:\n"
                      "    params:\n      pattern: \"^(?!docker.io)\"\n")
    done = aiadmit("policies", "--config", str(config), "--policies", str(policy))
    assert done.returncode == 2, done.stdout
    (diagnostic,) = done.stderr.splitlines()
    assert diagnostic.startswith(f"{config}:6:") and ": error: " in diagnostic, diagnostic
    assert "param pattern: invalid regular expression" in diagnostic, diagnostic


def test_a_good_param_through_a_variable_still_decides_the_rule(tmp_path):
    """The check changes nothing at run time: the good pattern, read through two variables, passes the registry's
    image and fails the other."""
    policy, manifest = tmp_path / "policy.yaml", tmp_path / "pods.yaml"
    policy.write_text(POLICY.format(rules=RULES["a variable holding that variable"][0], **GOOD))
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  containers:\n"
           "  - name: c\n    image: {image}\n    resources: {{limits: {{nvidia.com/gpu: 1}}}}\n")
    manifest.write_text(pod.format(name="ours", image="registry.example/x:1") + "---\n"
                        + pod.format(name="theirs", image="docker.io/x:1"))
    done = aiadmit("audit", "-f", "json", "--policies", str(policy), str(manifest))
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    failed = {(f["resource"]["name"], f["result"]) for f in report["findings"]}
    assert failed == {("theirs", "fail")}, report["findings"]


def test_a_literal_pattern_in_a_variable_loads_as_kubernetes_compiles_it(tmp_path):
    """Kubernetes validates a regex literal only where a call names it; a literal reaching matches() through a
    variable compiles there, so it loads here too (and errors at run time, never passing)."""
    text = POLICY.format(rules=RULES["a variable holding the param"][0], **GOOD).replace(
        "expression: params.pattern", "expression: \"'^(?!docker.io)'\"")
    assert load_problems(tmp_path, text) == []


def test_cel_with_a_policy_checks_a_param_read_through_its_variable(tmp_path):
    """`aiadmit cel --policy` checks an expression as a rule of the policy would be: the same param, read through
    the policy's variable, is refused before anything runs."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.format(rules="""\
  - name: named
    expression: container.name != ''
    message: "{{container.name}} is unnamed\"""", **BAD))
    done = aiadmit("cel", "container.image.matches(variables.alsoAllowed)", "--object",
                   "examples/manifests/pytorchjob-gpu.yaml", "--policy", str(policy))
    assert done.returncode == 2, done.stdout
    assert "param pattern: invalid regular expression" in done.stderr and "Traceback" not in done.stderr
