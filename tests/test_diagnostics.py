"""Every diagnostic (an input that cannot be read, a policy that does not load) is one line on stderr in one form,
`file:line:col: severity: message`, at the place the author wrote the mistake; findings stay on stdout."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from testdata import ROOT

POLICY = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: team-label
summary: Every AI workload names its team.
why: Cost reports are per team.
remediation: Add the label `team`.
action: deny
match:
  anyClasses: [ai]
target: object
rules:
  - name: has-team
    expression: has(object.metadata.labels) && 'team' in object.metadata.labels
     message: "{{object.kind}} {{object.metadata.name}} has no team label"
    path: /metadata/labels
"""
DIAGNOSTIC = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<column>\d+): (?P<severity>error|warning): \S")


def aiadmit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


def test_a_yaml_error_in_a_policy_with_message_templates_is_reported_where_it_is(tmp_path):
    """`{{ }}` in a policy is its message template, not Helm's: the YAML error is not "a template to render"."""
    templated, plain = tmp_path / "templated.yaml", tmp_path / "plain.yaml"
    templated.write_text(POLICY)
    plain.write_text(POLICY.replace("{{object.kind}} {{object.metadata.name}}", "the object"))
    answers = []
    for path in (templated, plain):
        done = aiadmit("policies", "--policies", str(path))
        assert done.returncode == 2
        answers.append(done.stderr.replace(str(path), "POLICY"))
    assert answers[0] == answers[1]
    assert answers[0].startswith("POLICY:15:13: error: YAML: mapping values are not allowed"), answers[0]
    assert "render it first" not in answers[0]


def test_manifest_and_policy_errors_share_one_stream_and_one_form(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: [x\n")
    audit = aiadmit("audit", str(broken), "examples/manifests/pytorchjob-gpu.yaml")
    assert audit.returncode == 2
    assert str(broken) not in audit.stdout, "an input error is not a finding: stderr, not the report"
    (line,) = audit.stderr.splitlines()
    assert DIAGNOSTIC.match(line) and line.startswith(f"{broken}:4:1: error: YAML:"), line
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    load = aiadmit("audit", "--policies", str(policy), "examples/manifests/pytorchjob-gpu.yaml")
    assert load.returncode == 2 and not load.stdout
    assert all(DIAGNOSTIC.match(line) for line in load.stderr.splitlines()), load.stderr
    fix = aiadmit("fix", "--check", str(broken))
    assert fix.returncode == 2
    assert [line for line in fix.stderr.splitlines() if DIAGNOSTIC.match(line)] == [line], fix.stderr


def test_an_unknown_kind_in_match_is_an_error_naming_the_closest_known_kind(tmp_path):
    policy = tmp_path / "policy.yaml"
    base = POLICY.replace("     message:", "    message:")
    policy.write_text(base.replace("anyClasses: [ai]", "kinds: [Pod, Deploymnet]"))
    done = aiadmit("policies", "--policies", str(policy))
    assert done.returncode == 2
    assert done.stderr.startswith(f"{policy}:10:"), done.stderr
    assert "kind 'Deploymnet' is not a kind aiadmit knows: did you mean 'Deployment'?" in done.stderr
    policy.write_text(base.replace("anyClasses: [ai]", "kinds: [Pod, Deploymnet]\n  unknownKinds: allow"))
    assert aiadmit("policies", "--policies", str(policy)).returncode == 0


REGEX_POLICY = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: image-registry
summary: Images come from the registry.
why: Supply chain.
remediation: Use the registry.
action: deny
match:
  anyClasses: [ai]
target: container
params:
  pattern: "^(?!docker.io)"
  label: team
variables:
  - name: teamLabel
    expression: "object.metadata.labels[params.label]"
  - name: owned
    expression: "variables.teamLabel != ''"
rules:
  - name: from-registry
    expression: container.image.matches(params.pattern)
    message: "{{container.name}} image from elsewhere"
  - name: found
    expression: container.image.find(params.pattern) != ''
    message: "{{container.name}} image from elsewhere"
  - name: owned
    expression: variables.owned
    message: "not owned"
"""


def test_a_param_that_feeds_a_regex_is_checked_at_load_like_a_literal(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(REGEX_POLICY)
    done = aiadmit("policies", "--policies", str(policy))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()  # once, at the param's value, however many expressions use it
    assert line.startswith(f"{policy}:13:") and "param pattern: invalid regular expression" in line, line
    assert "rule from-registry" in line, line
    policy.write_text(REGEX_POLICY.replace("^(?!docker.io)", "^registry[.]example/"))
    assert aiadmit("policies", "--policies", str(policy)).returncode == 0


def test_each_element_of_a_param_list_a_comprehension_feeds_to_a_regex_is_checked_at_its_own_line(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(REGEX_POLICY.replace('  pattern: "^(?!docker.io)"\n',
                                           '  pattern: "^registry[.]example/"\n  patterns:\n    - "^ok/"\n'
                                           '    - "^(?!docker.io)"\n')
                      .replace("container.image.matches(params.pattern)",
                               "params.patterns.exists(p, container.image.matches(p))"))
    done = aiadmit("policies", "--policies", str(policy))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{policy}:16:") and "param patterns[1]: invalid regular expression" in line, line
    policy.write_text(policy.read_text().replace("^(?!docker.io)", "^registry[.]example/"))
    assert aiadmit("policies", "--policies", str(policy)).returncode == 0


def test_a_config_override_of_a_regex_param_is_reported_in_the_config_file(tmp_path):
    policy, config = tmp_path / "policy.yaml", tmp_path / "config.yaml"
    policy.write_text(REGEX_POLICY.replace("^(?!docker.io)", "^registry[.]example/"))
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\npolicies:\n  image-registry:\n"
                      "    params:\n      pattern: \"^(?!docker.io)\"\n")
    done = aiadmit("policies", "--config", str(config), "--policies", str(policy))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"{config}:6:") and "param pattern: invalid regular expression" in line, line


def test_one_misspelt_param_in_a_variable_is_one_error_not_a_cascade(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(REGEX_POLICY.replace("^(?!docker.io)", "^registry[.]example/")
                      .replace("labels[params.label]", "labels[params.lable]"))
    done = aiadmit("policies", "--policies", str(policy))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()  # not also `variables has no field 'teamLabel'` and the rule that reads it
    assert line.startswith(f"{policy}:17:") and "unknown parameter 'lable' (known: label, pattern)" in line
