"""The checker refuses at load what Kubernetes' CEL refuses at compile time (webhook/cel/strictness.py, operators.py),
at the very character of the author's source; no Kubernetes needed (tests/test_k8scel_strict.py checks the same
against Kubernetes itself).

Why: `1 == 1.0`, `'a' in [1]`, `[1, 'a']` and `duration('1x')` used to load; Kubernetes rejects them, so such a rule
could not move to a ValidatingAdmissionPolicy, and each is a bug a checker should name (`1 == 1.0` never means what
it says in cel-go: there is no int-double equality overload).
"""

from __future__ import annotations

import os

import pytest

from webhook.cel.environment import CelError, Expression
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.declarations import CONTAINER
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

_ONE_TYPE = "(a list or map literal holds one type, as in Kubernetes: dyn(...) marks a value meant to differ)"


@pytest.mark.parametrize("source, at, message", [
    # cel-go's overloads: one type twice
    ("1 == 1.0", "== 1.0", "no matching overload for '==' applied to (int, double)"),
    ("2u != 2", "!= 2", "no matching overload for '!=' applied to (uint, int)"),
    ("containerName == null", "== null", "no matching overload for '==' applied to (string, null)"),
    ("'a' in [1]", "in [1]", "no matching overload for 'in' applied to (string, list(int))"),
    ("1 in {'a': 1}", "in {", "no matching overload for 'in' applied to (int, map(string, int))"),
    ("true ? 'a' : 1", "? 'a'", "no matching overload for '?:' applied to (bool, string, int)"),
    ("[1] + ['a']", "+ ['a']", "no matching overload for '+' applied to (list(int), list(string))"),
    ("sets.contains([1], ['a'])", "sets.", "the two lists hold different types"),
    ("int(true)", "int(", "no matching overload for int() applied to (bool)"),
    ("size(1)", "size(", "no matching overload for size() applied to (int)"),
    ("containerName.getHours() > 1", "getHours", "getHours() applied to (string)"),
    ("'abc'.indexOf(1) > 0", "indexOf", "a string's indexOf takes a string"),
    # Kubernetes' validators: homogeneous literals, constant durations, timestamps and format strings
    ("[1, 'a'].size() > 1", "'a'", "expected type 'int' but found 'string' " + _ONE_TYPE),
    ("[container.name, 1].size() > 1", "1]", "expected type 'dyn' but found 'int'"),
    ("{'a': 1, 'b': 'x'}.size() > 1", "'x'", "expected type 'int' but found 'string'"),
    ("{'a': 1, 2: 1}.size() > 1", "2: 1", "expected type 'string' but found 'int'"),
    ("[?optional.of(1), 'a'].size() > 1", "'a'", "expected type 'int' but found 'string'"),
    ("[?container.?name, 1].size() > 1", "1]", "expected type 'dyn' but found 'int'"),
    ("[[1], [container.name]].size() > 1", "[container", "expected type 'list(int)' but found 'list(dyn)'"),
    ("duration('1x') > duration('1s')", "'1x'", "invalid duration argument"),
    ("timestamp('2024-13-01T00:00:00Z') > timestamp(0)", "'2024", "invalid timestamp argument"),
    ("'%d'.format([2.0]) != ''", "2.0", "error during formatting: decimal clause can only be used on integers, "
                                        "was given double"),
    ("'%d %d'.format([1]) != ''", "[1]", "index 1 out of range"),
    ("'%d'.format([1, 2]) != ''", "[1, 2]", "too many arguments supplied to string.format (expected 1, got 2)"),
    ("'%a'.format([1]) != ''", "[1]", 'unrecognized formatting clause "a"'),
    ("'%d'.format([duration('1s')]) != ''", "duration", "was given google.protobuf.Duration"),
    # timestamps and durations, typed as in cel-go
    ("duration('1s') - timestamp(0) > duration('1s')", "- timestamp", "applied to (duration, timestamp)"),
    ("size(duration('1s')) > 0", "size", "applied to (duration)"),
    ("duration('1s').getFullYear() > 0", "getFullYear", "a timestamp's accessor"),
    ("[1, duration('1s')].size() > 0", "duration", "expected type 'int' but found 'duration'"),
])
def test_what_kubernetes_rejects_fails_the_load_at_its_place(source, at, message):
    with pytest.raises(CelError) as raised:
        Expression(source, declarations=CONTAINER)
    assert message in raised.value.message, raised.value.message
    assert raised.value.offset == source.index(at), (raised.value.offset, source[raised.value.offset:])


@pytest.mark.parametrize("source", [
    "dyn(1) == 1.0", "container.x == 1.0", "1 < 2.5", "1u < 2", "[1] == []", "1 in []", "container.x in [1]",
    "true ? 1 : container.x", "[1] + []", "[[1], []].size() == 2", "[container.name, container.image].size() == 2",
    "[dyn(1), dyn('a')].size() == 2", "{'a': dyn(1), 'b': dyn('x')}.size() == 2",
    "'%s %d'.format(['a', 1]) != ''", "'%s'.format([[1, 'a']]) != ''", "container.?name == null",
    "[?optional.of(1), 2].size() == 2", "duration('1h') == duration('60m')", "sign(quantity('1')) == 1",
    "[container.name, true ? container.image : 'x'].size() == 2", "string(null) == ''",
    "workload != null", "ip('1.2.3.4') != null", "timestamp(0) - timestamp(1) < duration('1s')",
    "timestamp(container.x) + duration('1h') > timestamp(0)",
    "[duration('1s'), duration('2s')].sum() == duration('3s')", "duration('1s').getHours() == 0",
    "timestamp(0).getHours('UTC') == 0", "duration(duration('1s')) == duration('1s')", "int(timestamp(0)) == 0",
])
def test_what_kubernetes_compiles_still_loads(source):
    Expression(source, declarations=CONTAINER)


def test_cel_go_s_checker_alone_takes_mixed_literals():
    """The conformance suite is written for cel-go's checker: `kubernetes=False` leaves Kubernetes' validators out,
    but not cel-go's overloads."""
    assert Expression("[1, 'a'][1]", kubernetes=False).run({}) == "a"
    with pytest.raises(CelError, match="applied to \\(int, double\\)"):
        Expression("1 == 1.0", kubernetes=False)


def test_a_mixed_literal_in_a_policy_is_named_at_its_line_and_column(tmp_path):
    """In a folded YAML block, the file position is that of the offending element, as the author wrote it."""
    text = open(os.path.join(BUILTIN_POLICY_DIR, "image-digest.yaml"), encoding="utf-8").read()
    anchor = "      !container.image.matches('^([^@]*/)?[^/@:]+:latest$')"
    assert text.count(anchor) == 1
    mutated = text.replace(anchor, anchor + " &&\n      [container.image, 1].size() == 2")
    where = mutated.index("1].size() == 2")
    line = mutated.count("\n", 0, where) + 1
    column = where - mutated.rfind("\n", 0, where)
    path = tmp_path / "image-digest.yaml"
    path.write_text(mutated, encoding="utf-8")
    with pytest.raises(PolicyLoadError) as raised:
        load_policies([str(path)])
    assert any(p.startswith(f"{path}:{line}:{column}:") and "expected type 'dyn' but found 'int'" in p
               for p in raised.value.problems), raised.value.problems


def test_the_strictness_checks_stay_linear_in_the_nesting():
    """The literal checks look at a node's type again; a memo keeps `[?optional.of([?optional.of(...)])]` from being
    checked 2^depth times (depth 18 took 3.9 s before it)."""
    import time

    started = time.monotonic()
    for depth in (18, 35):
        Expression("[?optional.of(" * depth + "1" + ")]" * depth)
        Expression("'%s'.format([" + "[" * depth + "1" + "]" * depth + "])")
    assert time.monotonic() - started < 1.0
