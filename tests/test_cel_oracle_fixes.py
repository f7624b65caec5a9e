"""What the Kubernetes CEL oracle (tests/test_k8scel_*.py) found, kept without it (no Go needed here)."""

from __future__ import annotations

import pytest

from webhook.cel.environment import CelError, Expression, new_context
from webhook.cel.parser import UInt


def test_sign_is_a_global_function_as_in_kubernetes():
    # Kubernetes has only sign(q) (its oracle rejects q.sign(): "found no matching overload for 'sign'"); so has aiadmit.
    assert Expression('sign(quantity("-2"))').run(new_context()) == -1
    with pytest.raises(CelError, match=r"sign\(\) is a global function") as caught:
        Expression('quantity("3").sign()')
    assert caught.value.offset == len("quantity(\"3\").")  # at the method, in the source as written


@pytest.mark.parametrize("text", ["1e400", "-1e400"])
def test_double_of_an_out_of_range_string_is_an_error_as_in_kubernetes(text):
    with pytest.raises(Exception, match="out of range"):
        Expression(f'double("{text}")').run(new_context())
    assert Expression('double("-inf")').run(new_context()) == float("-inf")
    assert Expression('double("1e-400")').run(new_context()) == 0.0


@pytest.mark.parametrize("source, zero", [
    ("[1.5].filter(x, x > 9.0).sum()", 0.0), ("[1u].filter(x, x > 9u).sum()", UInt(0)),
    ("[1].filter(x, x > 9).sum()", 0), ("[].sum()", 0), ("dyn([1.5]).filter(x, x > 9.0).sum()", 0),
    ("[[1.5]].map(l, l.filter(x, x > 9.0).sum())[0]", 0.0), ("[2.5].filter(x, x > 9.0).sum() + 1.5", 1.5),
])
def test_an_empty_list_sums_to_the_zero_of_its_static_type_as_in_kubernetes(source, zero):
    """Kubernetes types the list when it compiles: 0.0 for doubles, 0u for uints, 0 for ints or a list of dyn."""
    value = Expression(source).run(new_context())
    assert value == zero and type(value) is type(zero), value


def test_a_sum_over_a_policy_variable_has_the_variables_static_type(tmp_path):
    from webhook.engine.core import Engine
    from webhook.language.loader import load_policies
    from webhook.model.resource import Resource

    (tmp_path / "p.yaml").write_text("""\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata: {name: sums}
summary: s
why: w
remediation: r
action: deny
match: {anyClasses: [ai]}
target: container
variables:
  - name: big
    expression: '[1.5, 2.5].filter(x, x > 9.0)'
rules:
  - name: typed
    expression: type(variables.big.sum()) != double
    message: "{{ variables.big.sum() }}"
  - name: indexed
    expression: type(variables["big"].sum()) != double
    message: m
""")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    findings = Engine(load_policies([str(tmp_path / "p.yaml")])).evaluate(Resource(pod)).findings
    assert [(f.rule, f.result) for f in findings] == [("typed", "fail"), ("indexed", "fail")], findings


@pytest.mark.parametrize("source, value", [
    ("[3, 1, 2].sortBy(e, e)", [1, 2, 3]), ('[{"a": 2}, {"a": 1}].sortBy(e, e.a)', [{"a": 1}, {"a": 2}]),
    ('["bb", "a", "ccc"].sortBy(s, -size(s))', ["ccc", "bb", "a"]), ("[].sortBy(e, e)", []),
    ("[5, 4, 3, 2, 1].sortBy(e, e % 2)", [4, 2, 5, 3, 1]),  # stable: equal keys keep their order
    ("[2, 1].map(x, [x, 0].sortBy(y, -y))", [[2, 0], [1, 0]]), ("[3, 1].sortBy(e, e).sortBy(e, -e)", [3, 1]),
])
def test_the_sortby_macro_of_the_lists_extension(source, value):
    expression = Expression(source)
    assert expression.native and expression.run(new_context()) == value


@pytest.mark.parametrize("source, error", [
    ("dyn([[1], [2]]).sortBy(e, e)", "must be comparable"), ("[dyn(1), dyn('a')].sortBy(e, e)", "same type"),
])
def test_sortby_keys_must_be_of_one_orderable_type(source, error):
    with pytest.raises(Exception, match=error):
        Expression(source).run(new_context())


@pytest.mark.parametrize("source", ["[1, 2].sortBy(e, [e])", '{"a": 1}.sortBy(k, k)', "[1].sortBy(e, e, e)",
                                    "[1].sortBy(1, e)"])
def test_a_sortby_kubernetes_rejects_fails_the_load(source):
    with pytest.raises(CelError):
        Expression(source)


@pytest.mark.parametrize("source", ["{1: 'a', true: 'b'}[1]", "{0: 'a', false: 'b'}", "{'k': 1, 1: 2, true: 3}"])
def test_a_map_literal_of_mixed_key_types_fails_the_load_as_in_kubernetes(source):
    with pytest.raises(CelError, match="expected type"):
        Expression(source)


@pytest.mark.parametrize("source", ["{dyn(1): 'a', dyn(true): 'b'}[1]", "size({dyn(true): 'a', dyn(1): 'b'})",
                                    "{dyn(0): 'a', dyn(false): 'b'}"])
def test_a_map_with_the_keys_true_and_1_is_an_error_not_a_lost_entry(source):
    """Kubernetes keeps both entries; a Python dict cannot, so aiadmit errors rather than lose one."""
    with pytest.raises(Exception, match="cannot keep both"):
        Expression(source).run(new_context())


def test_maps_without_that_collision_keep_cel_key_equality():
    run = lambda source: Expression(source).run(new_context())  # noqa: E731
    assert run("{dyn(true): 1, dyn(2): 2, dyn(5u): 3}[true]") == 1 and run("{true: 1, false: 2}[false]") == 2
    assert run("size({dyn(2): 'a', dyn(true): 'b'})") == 2
    with pytest.raises(Exception, match="duplicate"):
        run("{dyn(1): 'a', dyn(1u): 'b'}")
