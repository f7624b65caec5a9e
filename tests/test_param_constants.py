"""Params that feed a typed function (quantity(), duration(), timestamp(), ip(), cidr(), url(), semver(), a format
string, a regex) are constants once loaded: each is checked at load like a literal, wherever the expression reaches
it (an index, a map key, a comprehension over a list or a map, two-variable comprehensions, cel.bind), and its
problem is reported once, at the param's own line in the policy, or in the config file that sets it."""

from __future__ import annotations

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
  name: gpu-memory
summary: Each GPU comes with enough memory.
why: Out-of-memory kills waste GPU hours.
remediation: Request more memory.
action: deny
match:
  anyClasses: [ai]
target: container
params:
  minMemoryPerDevice: "{value}"
  other: 1
rules:
  - name: enough
    expression: "type({call}) != bool"
    message: "{{{{container.name}}}} has too little memory"
  - name: also
    expression: "has(container.name) && type({call}) != bool"
    messageExpression: "'needs ' + string(type({call}) != bool)"
"""
POLICY_LINE = 13  # where `minMemoryPerDevice:` is written


def load_problems(tmp_path, text: str, name: str = "policy.yaml") -> list[str]:
    path = tmp_path / name
    path.write_text(text)
    try:
        load_policies([str(path)])
    except PolicyLoadError as exc:
        return [problem.replace(str(path), "POLICY") for problem in exc.problems]
    return []


def aiadmit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


# (function call with the param in it, a value that cannot run, one that can, words of the error)
TYPED = [
    ("quantity(params.minMemoryPerDevice)", "4 Gi", "4Gi", "is not a Kubernetes quantity"),
    ("duration(params.minMemoryPerDevice)", "5 minutes", "5m", "invalid duration() argument"),
    ("timestamp(params.minMemoryPerDevice)", "yesterday", "2026-01-01T00:00:00Z", "invalid timestamp() argument"),
    ("ip(params.minMemoryPerDevice)", "10.0.0", "10.0.0.1", "invalid ip() argument"),
    ("cidr(params.minMemoryPerDevice)", "10.0.0.0/33", "10.0.0.0/8", "invalid cidr() argument"),
    ("url(params.minMemoryPerDevice)", "not a url", "https://registry.example/v2", "invalid url() argument"),
    ("semver(params.minMemoryPerDevice)", "v1.2", "1.2.0", "invalid semver() argument"),
    ("cidr('10.0.0.0/8').containsIP(params.minMemoryPerDevice)", "10.0.0", "10.0.0.1", "invalid containsIP()"),
    ("params.minMemoryPerDevice.format([1])", "%q GiB", "%d GiB", 'unrecognized formatting clause "q"'),
    ("params.minMemoryPerDevice.format(['a'])", "%d GiB", "%s GiB", "decimal clause can only be used on integers"),
]


@pytest.mark.parametrize("call, bad, good, words", TYPED, ids=[row[0].split("(")[0] or row[0] for row in TYPED])
def test_a_param_fed_to_a_typed_function_is_checked_at_load_at_its_own_line_once(tmp_path, call, bad, good, words):
    problems = load_problems(tmp_path, POLICY.format(value=bad, call=call))
    # once, at the param's value, though three expressions (a rule, another, a messageExpression) use it
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"POLICY:{POLICY_LINE}:") and "param minMemoryPerDevice:" in problems[0], problems
    assert words in problems[0] and "(used by rule enough's expression)" in problems[0], problems
    assert load_problems(tmp_path, POLICY.format(value=good, call=call)) == []


def test_a_literal_kubernetes_compiles_still_loads(tmp_path):
    """Kubernetes validates duration, timestamp, regex and format literals at compile time, not quantity() ones:
    `quantity("4 Gi")` compiles there (and fails at run time), so it loads here; a param is aiadmit's constant."""
    text = POLICY.format(value="4Gi", call="quantity('4 Gi')")
    assert load_problems(tmp_path, text) == []
    problems = load_problems(tmp_path, POLICY.format(value="4Gi", call="duration('5 minutes')"))
    assert len(problems) == 2, problems  # in each rule's own text (the second's messageExpression stops it)
    assert all("invalid duration argument" in p and "param" not in p.split(": ", 2)[2] for p in problems), problems


LISTED = POLICY.replace('  minMemoryPerDevice: "{value}"\n', '  sizes: ["1Gi", "{value}"]\n'
                        '  byKind:\n    Pod: "2Gi"\n    Job: "{value}"\n'
                        '  registries:\n    - "^registry[.]example/"\n    - "{pattern}"\n'
                        '  byTeam:\n    ml: "^ml/"\n    infra: "{pattern}"\n')
# where each element is written in LISTED: sizes (13, the second element), byKind.Job (16), registries[1] (19),
# byTeam.infra (22)
REACHED = [
    ("quantity(params.sizes[1])", "sizes[1]", 13),
    ("quantity(params['sizes'][1])", "sizes[1]", 13),
    ("quantity(params.byKind['Job'])", "byKind['Job']", 16),
    ("quantity(params.byKind[container.name])", "byKind['Job']", 16),  # any key: any value may be read
    ("params.sizes.all(s, quantity(s).isInteger()) ? quantity('1') : quantity('2')", "sizes[1]", 13),
    ("params.byKind.exists(k, v, quantity(v).isInteger()) ? quantity('1') : quantity('2')", "byKind['Job']", 16),
    ("container.image.matches(params.registries[1]) ? quantity('1') : quantity('2')", "registries[1]", 19),
    ("params.registries.exists(r, container.image.matches(r)) ? quantity('1') : quantity('2')", "registries[1]", 19),
    ("params.registries.exists(i, r, container.image.find(r) != '') ? quantity('1') : quantity('2')",
     "registries[1]", 19),
    ("params.byTeam.all(team, p, container.image.matches(p)) ? quantity('1') : quantity('2')", "byTeam['infra']",
     22),
    ("cel.bind(p, params.byTeam.infra, container.image.matches(p)) ? quantity('1') : quantity('2')",
     "byTeam['infra']", 22),
    ("params.registries.transformList(i, r, container.image.matches(r)).size() > 0 ? quantity('1') : quantity('2')",
     "registries[1]", 19),
]


@pytest.mark.parametrize("call, param, line", REACHED, ids=[row[0] for row in REACHED])
def test_each_element_an_index_a_map_or_a_comprehension_reaches_is_checked_at_its_own_line(tmp_path, call, param,
                                                                                          line):
    text = LISTED.format(value="4 Gi" if "quantity(params" in call or "quantity(s)" in call
                         or "quantity(v)" in call else "8Gi",
                         pattern="^(?!docker.io)" if "registr" in call or "byTeam" in call else "^x/", call=call)
    problems = load_problems(tmp_path, text)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"POLICY:{line}:") and f"param {param}:" in problems[0], problems
    fixed = LISTED.format(value="8Gi", pattern="^x/", call=call)
    assert load_problems(tmp_path, fixed) == []


def test_a_pattern_built_from_a_param_is_reported_at_the_expression_naming_the_param(tmp_path):
    text = LISTED.format(value="8Gi", pattern="^x/",
                         call="container.image.matches('^' + params.byTeam.ml + '(?<=x)') ? quantity('1') : "
                              "quantity('2')")
    problems = load_problems(tmp_path, text)
    assert len(problems) == 2, problems  # in each rule's own text: the expression holds the mistake too
    assert problems[0].startswith("POLICY:26:") and "built from param byTeam['ml']: invalid regular" in problems[0]


def test_a_comprehension_variable_rebound_by_cel_bind_is_not_the_param(tmp_path):
    call = ("params.registries.all(r, cel.bind(r, 'ok', container.image.matches(r))) ? quantity('1') : "
            "quantity('2')")
    assert load_problems(tmp_path, LISTED.format(value="8Gi", pattern="^(?!docker.io)", call=call)) == []


CONFIG = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Config
policies:
  gpu-memory:
    params:
      sizes:
        - "1Gi"
        - "{value}"
      byKind:
        Job: "{value}"
"""


@pytest.mark.parametrize("call, line", [("quantity(params.sizes[1])", 8), ("quantity(params.byKind.Job)", 10)])
def test_a_config_override_fed_to_a_typed_function_is_reported_in_the_config_file(tmp_path, call, line):
    policy, config = tmp_path / "policy.yaml", tmp_path / "config.yaml"
    policy.write_text(LISTED.format(value="8Gi", pattern="^x/", call=call))
    config.write_text(CONFIG.format(value="4 Gi"))
    done = aiadmit("policies", "--config", str(config), "--policies", str(policy))
    assert done.returncode == 2, done.stdout
    (diagnostic,) = done.stderr.splitlines()
    assert diagnostic.startswith(f"{config}:{line}:") and ": error: " in diagnostic, diagnostic
    assert "is not a Kubernetes quantity" in diagnostic, diagnostic
    config.write_text(CONFIG.format(value="4Gi"))
    assert aiadmit("policies", "--config", str(config), "--policies", str(policy)).returncode == 0


def test_the_bundles_quantity_param_overridden_badly_stops_the_audit_at_the_config_line(tmp_path):
    """The issue's case: resources-declared's `minMemoryPerDevice` set to "4 Gi" by a config used to load and make
    the rule an evaluation error on every workload; now the audit does not start, and says where the value is."""
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\npolicies:\n  resources-declared:\n"
                      "    params:\n      minMemoryPerDevice: \"4 Gi\"\n")
    done = aiadmit("audit", "--config", str(config), "examples/manifests/pytorchjob-gpu.yaml")
    assert done.returncode == 2 and not done.stdout, done.stdout
    (diagnostic,) = done.stderr.splitlines()
    assert diagnostic.startswith(f"{config}:6:7: error: policies.resources-declared.params.minMemoryPerDevice: "
                                 "param minMemoryPerDevice: invalid quantity() argument: '4 Gi'"), diagnostic
