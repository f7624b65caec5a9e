"""Which named `variables` a rule reads, as the load-time checker resolved them (cel/checker.py), not as a pattern
over its source: binding provides what those variables read, and only that (language/compiler.py binding_reads).

Each variable below reads one level-specific name of its own (`object`, `pod`, `namespaceObject`, ...), so what a
rule's binding provides (`rule.variables`) shows which variables were found to be read."""

from __future__ import annotations

import pytest

from webhook.cel.checker import WHOLE, Struct
from webhook.cel.environment import Expression, Template, checked
from webhook.engine.core import Engine
from webhook.language import celrecord
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.checks import NONE
from webhook.language.loader import load_policies
from webhook.model.resource import Resource

# `name: "y"` quoted: a plain y is the boolean true to Kubernetes' YAML (go-yaml v2), and so to aiadmit's reader
HEAD = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: reads
summary: A test policy.
why: Because.
remediation: Fix it.
action: deny
match:
  anyClasses: [ai]
target: container
variables:
  - name: x
    expression: object.kind
  - name: "y"
    expression: 'has(pod.priorityClassName) ? pod.priorityClassName : ""'
  - name: z
    expression: 'namespaceObject == null ? "" : "ns"'
  - name: viaZ
    expression: variables.z + "!"
rules:
"""
# what reading each variable makes binding provide, beside `variables` itself
OWN = {"x": {"object"}, "y": {"pod"}, "z": {"namespaceObject"}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
       "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def _rule(tmp_path, body: str):
    path = tmp_path / "reads.yaml"
    path.write_text(HEAD + body)
    return load_policies([str(path)], checks=NONE)[0].rules[0]


def _provided(*names: str) -> frozenset:
    return frozenset({"variables"}).union(*(OWN[n] for n in names))


@pytest.mark.parametrize("expression, read", [
    ('variables["x"] != ""', ("x",)),
    ("variables.x != ''", ("x",)),
    ("has(variables.x)", ("x",)),
    ("variables.?x.orValue('') != ''", ("x",)),
    ("variables.viaZ != ''", ("z",)),  # z is read only through viaZ
    ('variables.x != "" && "variables.y" != "" && \'variables["y"]\' != ""', ("x",)),  # y only in string literals
    ("[1].all(variables, variables > 0) && variables.x != ''", ("x",)),  # a comprehension's own `variables`
    ("cel.bind(v, variables, v.y != '')", ("x", "y", "z")),  # `variables` whole: any of them
    ('["x"].all(k, variables[k] != "")', ("x", "y", "z")),  # a computed key: any of them
])
def test_binding_provides_what_the_variables_the_checker_resolved_read(tmp_path, expression, read):
    rule = _rule(tmp_path, f"""  - name: r
    expression: >-
      {expression}
    message: m
""")
    assert rule.variables == _provided(*read)


def test_a_message_template_binds_what_its_cel_segments_read_not_its_text(tmp_path):
    rule = _rule(tmp_path, """  - name: r
    expression: variables.x != ""
    message: "see variables.y and variables['z']: {{ variables.viaZ }}"
""")
    assert rule.variables == _provided("x", "z")


def test_a_message_expression_and_its_fallback_template_both_count(tmp_path):
    rule = _rule(tmp_path, """  - name: r
    expression: variables.x != ""
    messageExpression: variables.y + " variables.z"
    message: "{{ variables['viaZ'] }}"
""")
    assert rule.variables == _provided("x", "y", "z")


def test_a_variable_reading_variables_whole_makes_every_variable_provided(tmp_path):
    text = HEAD.replace("""rules:
""", """  - name: all
    expression: cel.bind(v, variables, v.x)
rules:
""") + """  - name: r
    expression: variables.all != ""
    message: m
"""
    path = tmp_path / "reads.yaml"
    path.write_text(text)
    rule = load_policies([str(path)], checks=NONE)[0].rules[0]
    assert rule.variables == _provided("x", "y", "z")


def test_what_binding_provides_is_enough_to_run_and_no_more(tmp_path):
    """The rule reads x only: the pod-level y is not provided, yet the rule runs (and fails) on a Pod."""
    path = tmp_path / "reads.yaml"
    path.write_text(HEAD + """  - name: r
    expression: variables.x == "Deployment" && "variables.y" != ""
    message: "{{ variables.x }} (not variables.y)"
""")
    policy = load_policies([str(path)], checks=NONE)[0]
    assert "pod" not in policy.rules[0].variables and not policy.rules[0].needs_pod
    findings = Engine([policy]).evaluate(Resource(POD)).findings
    assert [(f.rule, f.message) for f in findings] == [("r", "Pod (not variables.y)")]


def test_the_checker_reports_the_names_and_whole_reads():
    declarations = {"object": "dyn", "variables": Struct("variables", {"a": "int", "b": "string"})}
    assert checked('variables.a > 1 && variables["b"] == "variables.c"', None, declarations)[3] == {"a", "b"}
    assert checked("object.kind == 'x'", None, declarations)[3] == frozenset()
    assert WHOLE in checked("cel.bind(v, variables, v.a > 1)", None, declarations)[3]
    assert checked("cel.bind(variables, object, variables.a)", None, declarations)[3] == frozenset()
    assert Template("a {{ variables.a }} variables.b", None, None, declarations).named == {"a"}
    assert Expression("variables.?b.hasValue()", None, None, declarations).named == {"b"}


def test_the_record_carries_the_names_so_the_bundle_binds_the_same_without_a_check(monkeypatch):
    """The built-in bundle's record answers with the names too: loading it from the record binds exactly what
    checking every expression again binds."""
    found = checked("variables.a", None, {"variables": Struct("variables", {"a": "int"})})
    assert celrecord.decode(celrecord.encode(found)) == found
    recorded = {(p.id, r.name): r.variables for p in load_policies([BUILTIN_POLICY_DIR]) for r in p.rules}
    rechecked = {(p.id, r.name): r.variables for p in load_policies([BUILTIN_POLICY_DIR], checks=NONE)
                 for r in p.rules}
    assert recorded == rechecked
