"""Differential: aiadmit's compiled CEL against Kubernetes' own (tests/tools/k8scel: the VAP environment of v1.37, as a
1.37 API server compiles a new expression, in its default compatibility version 1.36).

Two sets: the CEL conformance expressions (tests/data/cel-spec) that Kubernetes' environment compiles, and
expressions of Kubernetes' CEL libraries (quantity, lists, regex, strings, optionals, sets, bind, two-variable
comprehensions, url/ip/cidr/format/semver). Agreement: the same value, or both an error (both rejecting at
compile time included). Every disagreement is a known difference below, with its reason, or the test fails.

Strictness: what Kubernetes rejects at compile time (a conformance expression, a library expression or a PROBE),
aiadmit must reject at load too (`Expression`, the test's variables declared dyn as for the oracle), unless it is of
a declared aiadmit extension class (EXTENSIONS, recognised by Kubernetes' own error) or a known leniency with its
reason (KNOWN_LENIENT); both lists only shrink (an entry nothing matches fails). And what Kubernetes compiles of
the PROBES aiadmit must load: nothing stricter than Kubernetes.

    python3 -m pytest -q -s tests/test_k8scel_differential.py
"""

from __future__ import annotations

import glob
import math
import os
from collections import Counter

import pytest

import celspec
import k8scel
from k8scel import oracle  # noqa: F401 - the fixture (built once per session)
from webhook.cel.checker import DYN
from webhook.cel.environment import CelError, Expression, new_context

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cel-spec", "testdata")

pytestmark = pytest.mark.k8scel

LIBRARY = [
    # quantity
    'quantity("1Gi")', 'quantity("1.5").asInteger()', 'quantity("1500m").asApproximateFloat()',
    'quantity("2").asInteger()', 'quantity("1.5").isInteger()', 'quantity("1Gi").isInteger()',
    'quantity("1").isLessThan(quantity("2"))', 'quantity("2").isGreaterThan(quantity("1500m"))',
    'quantity("1").compareTo(quantity("1000m"))', 'quantity("1").compareTo(quantity("2"))',
    'quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")', 'quantity("1").add(2).asInteger()',
    'quantity("5").sub(quantity("2")).asInteger()', 'quantity("5").sub(7).asApproximateFloat()',
    'sign(quantity("-3"))', 'sign(quantity("0"))', 'isQuantity("1Gi")', 'isQuantity("1Gb")', 'isQuantity("")',
    'quantity("x")', 'quantity("1") == quantity("1000m")', 'quantity("1") < quantity("2")',
    'quantity("1") + quantity("2")', 'quantity("1") == 1', 'quantity("9223372036854775807").asInteger()',
    'quantity("9223372036854775808").asInteger()', 'quantity("1e3").asInteger()', 'quantity("100Mi").isInteger()',
    'quantity("Gi")', 'isQuantity("Mi")', 'quantity("-").asInteger()', 'quantity("Pi")', 'quantity(" 1")',
    'quantity("1000m").isInteger()', 'quantity("1.0").asInteger()', 'quantity("1Pi").isInteger()',
    'quantity("1.5Gi").asInteger()', 'quantity("123456789012345678").asInteger()', 'quantity("0.3").asApproximateFloat()',
    'quantity("9223372036854775808").isInteger()', 'quantity("9223372036854775808").asApproximateFloat()',
    'quantity("99999999999999999999").compareTo(quantity("99999999999999999998"))',
    'quantity("9223372036854775808").compareTo(quantity("9223372036854775807"))',
    'quantity("10Ei").compareTo(quantity("9223372036854775807"))', 'quantity("10e18").isInteger()',
    'quantity("500m").add(quantity("500m")).isInteger()', 'quantity("1k").add(quantity("1")).asInteger()',
    'quantity("4611686018427387904").add(quantity("4611686018427387904")).isInteger()',
    'quantity("0.7").sub(quantity("0.1")).asApproximateFloat()', 'quantity("0.0000000001").compareTo(quantity("1n"))',
    'quantity("99999999999999999999") == quantity("99999999999999999998")', 'quantity("1e4294967296").asInteger()',
    # lists
    '[1, 3].sum()', '[1.5, 2.5].sum()', '[].sum()', '[1u, 2u].sum()', '[1, 2, 3].isSorted()', '[3, 1].isSorted()',
    '["a", "b"].isSorted()', '[2, 1, 3].min()', '[2, 1, 3].max()', '[].min()', '["b", "a"].max()',
    '[1, 2, 1].indexOf(1)', '[1, 2, 1].lastIndexOf(1)', '[1, 2].indexOf(5)', '[[1], [2]].indexOf([2])',
    '[1.0, 2.0].min()', '[1, 2, 3].slice(1, 2)', '[[1, 2], [3]].flatten()', '[3, 1, 2].sort()',
    '[1, 2, 2, 3].distinct()', '[1, 2, 3].reverse()', 'lists.range(4)', '[1, 2, 3].first()', '[].last()',
    '[1.5].filter(x, x > 9.0).sum()', '[1u].filter(x, x > 9u).sum()', '[[1.5]].map(l, l.filter(x, x > 9.0).sum())',
    '[3, 1, 2].sortBy(e, e)', '[{"a": 2}, {"a": 1}].sortBy(e, e.a)', '["bb", "a"].sortBy(s, size(s))',
    '[3, 2, 1].sortBy(x, x).sortBy(y, -y)', '[].sortBy(e, e)', 'dyn([[1], [2]]).sortBy(e, e)',
    '[1, 2].sortBy(e, [e])', '{"b": 1}.sortBy(k, k)', '[2, 1].map(x, [x, 0].sortBy(y, y + x))',
    '[5, 4, 3, 2, 1].sortBy(e, e % 2)', '[1].sortBy(e, e, e)',
    # regex
    '"abc".matches("^a.c$")', '"abc".matches("(a+)+$")', '"a1b22".find("[0-9]+")', '"a1b22".findAll("[0-9]+")',
    '"a1b22".findAll("[0-9]+", 1)', '"abc".find("z")', '"é".matches("^\\\\w$")', '"x".matches("(?<=a)x")',
    '"ab\\nc".matches("b$")', '"abc".matches("c\\\\z")', '"ÄB".matches("^\\\\pL+$")',
    # strings extension (v2)
    '"hello".charAt(1)', '"hello".indexOf("l")', '"hello".lastIndexOf("l")', '"hello".indexOf("l", 3)',
    '"a,b,c".split(",")', '"a,b,c".split(",", 2)', '"hello".substring(1, 3)', '"  x  ".trim()',
    '"Hello".upperAscii()', '"ÀB".lowerAscii()', '"àb".upperAscii()', '"hello".replace("l", "L")',
    '"hello".replace("l", "L", 1)', '"abc".reverse()', '["a", "b"].join("-")', '["a", "b"].join()',
    'strings.quote("a\\"b")', '"%s-%d".format(["x", 3])', '"%.2f".format([1.2345])', '"%x".format([255])',
    '"%b".format([5])', '"%o".format([8])', '"%e".format([1234.5])', '"%s".format([[1, 2]])',
    '"%s".format([{"a": 1}])', '"%s".format([1.0])', '"%d".format(["x"])', '"hello".substring(4, 1)',
    '"ab".charAt(5)', 'size("héllo")', '"x".indexOf("")',
    # optionals
    '{"a": 1}.?a', '{"a": 1}.?b', '{"a": 1}.?b.orValue(5)', '[1, 2][?5]', '[1, 2][?0].value()',
    'optional.of(1).hasValue()', 'optional.none().orValue(2)', '{?"a": optional.none(), "b": 2}',
    '[?optional.of(1), ?optional.none()]', 'optional.ofNonZeroValue("")', 'optional.of(2).optMap(x, x * 2)',
    'optional.none().value()', '{"a": {"b": 1}}.?a.?b',
    # sets
    'sets.contains([1, 2, 3], [1, 2])', 'sets.equivalent([1, 2], [2, 1, 1])', 'sets.intersects([1], [2])',
    'sets.contains([1], [1.0])',
    # bind, two-variable comprehensions, macros
    'cel.bind(x, 2, x * x)', '[1, 2].all(i, v, i < v)', '{"a": 1}.exists(k, v, k == "a" && v == 1)',
    '[1, 2, 3].existsOne(x, x > 2)', '[1, 2].transformList(i, v, v * 10)', '{"a": 1}.transformMap(k, v, v + 1)',
    '[1, 2].transformList(i, v, i > 0, v)', '[1, 2, 3].exists_one(x, x > 1)', '[1, 2].map(x, x > 1, x * 2)',
    # numbers and comparisons Kubernetes enables (cross-type numeric comparisons)
    '1 < 2.5', '1u < 2', 'dyn(9223372036854775807) < 9223372036854775808.0', '1 == 1.0', 'dyn(1) == dyn(1u)',
    '[1, "a"]', '{"a": 1, "b": "x"}', '9223372036854775807 + 1', '1 / 0', '5 % 0', '-9223372036854775808 / -1',
    'int(1e20)', 'double("1e400")', 'uint(-1)', 'string(1.5)', 'string(b"\\xff")', 'bytes("é")',
    'timestamp("2024-02-29T12:00:00Z").getDayOfYear()', 'duration("1h30m").getMinutes()',
    'timestamp("2024-01-01T00:00:00Z") + duration("36h")', 'timestamp("2024-01-01T00:00:00Z").getHours("+05:30")',
    # Kubernetes libraries aiadmit does not implement (docs/policy-language.md says so)
    'url("https://example.com:80/p?q=1").getHost()', 'isURL("not a url")', 'ip("10.0.0.1").family()',
    'cidr("10.0.0.0/8").containsIP(ip("10.1.2.3"))', 'isIP("::1")', 'format.dns1123Label().validate("Abc")',
    'semver("1.2.3").isLessThan(semver("1.10.0"))', 'isSemver("1.2")',
]

# Why aiadmit's answer differs from Kubernetes' (measured on 2026-12-01 with 1.34 = cel-go v0.26, and again on
# 2026-12-02 with 1.37 = cel-go v0.29.2: the same differences).
_FORMAT = ("Kubernetes (1.34 to 1.37) has version 2 of cel-go's strings extension, whose format() writes %e as 1.2×10⁰³, "
           "infinity as ∞ and quotes strings inside lists and maps; aiadmit follows the cel-spec conformance files")
_SPEC = "cel-go (v0.26 in Kubernetes 1.34-1.36, v0.29 in 1.37) gives a value where the cel-spec conformance file wants an error; aiadmit errors"
KNOWN_DIFFERENCES: dict[str, str] = {
    '"%e".format([1234.5])': _FORMAT, '"%s".format([{"a": 1}])': _FORMAT,
    '"abc".reverse()': "string reverse() is version 3 of the strings extension: not in Kubernetes 1.37 (v2)",
    '[1, 2, 3].existsOne(x, x > 2)': "a one-variable existsOne is no macro of Kubernetes 1.37 (exists_one is)",
    'cel.bind(x, 2, x * x)': "cel.bind (cel-go's bindings extension) is not in Kubernetes' VAP environment",
}
# Conformance tests by name (a prefix names a group) -> why aiadmit's answer differs from Kubernetes'.
KNOWN_CONFORMANCE: dict[str, str] = {
    "fields/qualified_identifier_resolution/map_value_repeat_key": _SPEC + " (a repeated map key: cel-go keeps "
                                                                    "the last)",
    "fields/qualified_identifier_resolution/": "a variable bound under a dotted name (a.b.c): aiadmit never binds one",
    "namespace/": "a variable bound under a dotted name (x.y): aiadmit never binds one",
    "fields/map_fields/map_bad_key_type_": ("Kubernetes plans programs with cel-go's optimizer, which fails on the "
                                            "constant index {1: 2}[b''] before && / || could absorb the error as "
                                            "the spec (and aiadmit) do"),
    "optionals/optionals/map_null_entry_no_such_key": _SPEC + " (a field of an optional's non-map value: none)",
    "optionals/optionals/map_present_key_invalid_field": _SPEC + " (a field of an optional's non-map value: none)",
    "string_ext/format/": _FORMAT,
    "string_ext/value_errors/indexof_out_of_range": _SPEC + " (indexOf from past the end: -1)",
    "string_ext/value_errors/lastindexof_out_of_range": _SPEC + " (lastIndexOf from past the end: -1)",
}


def _conformance_reason(label: str):
    return next((reason for prefix, reason in KNOWN_CONFORMANCE.items() if label.startswith(prefix)), None)


def _plain(value) -> bool:
    """Whether a binding's value has the same JSON form for both (no uint, bytes, NaN, non-string keys)."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        return all(map(_plain, value))
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    return False


def _aiadmit(source: str, bindings: dict):
    def run():
        context = new_context()
        context.update(bindings)
        return Expression(source).run(context)
    return run


def _compare(oracle, cases):
    """cases: (label, source, bindings) -> (counts, {label: what} disagreements)."""
    answers = oracle.ask([dict(expr=source, vars=bindings, dynVars=sorted(bindings)) for _, source, bindings in cases])
    counts: Counter = Counter()
    differences = {}
    for (label, source, bindings), answer in zip(cases, answers):
        verdict, what = k8scel.outcome(source, _aiadmit(source, bindings), answer)
        counts[what if verdict == "agree" else "differ"] += 1
        if verdict == "differ":
            differences[label] = what
    return counts, differences, answers


def _conformance_cases():
    cases, skipped = [], Counter()
    for path in sorted(glob.glob(os.path.join(DATA, "*.textproto"))):
        name = os.path.basename(path)[:-len(".textproto")]
        for section in celspec.parse(open(path, encoding="utf-8").read()).get("section", []):
            for test in section.get("test", []):
                label = f"{name}/{celspec._one(section, 'name').decode()}/{celspec._one(test, 'name').decode()}"
                reason = celspec.skip_reason(test)
                try:
                    bindings = {celspec._one(b, "key").decode(): celspec.value(
                        celspec._one(celspec._one(b, "value"), "value")) for b in test.get("bindings", [])}
                except celspec.Unrepresentable:
                    reason = reason or "a binding aiadmit has no value of"
                    bindings = {}
                if not reason and not _plain(bindings):
                    reason = "a binding with no common JSON form (uint, bytes, NaN, non-string keys)"
                if reason:
                    skipped[reason] += 1
                    continue
                cases.append((label, test["expr"][0].decode("utf-8", "surrogatepass"), bindings))
    return cases, skipped


def test_conformance_expressions_kubernetes_runs_give_the_same_answers(oracle):
    if not os.path.isdir(DATA):
        pytest.skip("tests/data/cel-spec is missing")
    cases, skipped = _conformance_cases()
    answers = oracle.ask([dict(expr=source, dynVars=sorted(b), eval=False) for _, source, b in cases])
    runnable = [case for case, answer in zip(cases, answers) if answer["compiled"]]
    rejected = Counter(label.split("/")[0] for (label, _, _), a in zip(cases, answers) if not a["compiled"])
    counts, differences, _ = _compare(oracle, runnable)
    lenient = Counter()
    for (label, source, bindings), answer in zip(cases, answers):
        if not answer["compiled"]:
            try:
                Expression(source, declarations=dict.fromkeys(bindings, "dyn"))  # as the oracle's dynVars
                lenient[label.split("/")[0]] += 1
            except Exception:  # noqa: BLE001 - rejected by both: they agree
                pass
    known = {k: v for k, v in differences.items() if _conformance_reason(k)}
    print(f"\ncel-spec: {len(cases)} expressions, {len(runnable)} compile in Kubernetes' environment "
          f"(rejected by file: {dict(rejected.most_common())}; skipped {sum(skipped.values())}: {dict(skipped)})")
    print(f"aiadmit loads {sum(lenient.values())} of the {len(cases) - len(runnable)} Kubernetes rejects (by file: "
          f"{dict(lenient.most_common())}): declared aiadmit extensions and known leniencies, "
          f"each classified by test_aiadmit_rejects_what_kubernetes_rejects_but_its_declared_extensions")
    print(f"of those it compiles: same value {counts['same value']}, both error {counts['both error']}, differ "
          f"{counts['differ']} ({len(known)} known)")
    reasons = Counter(_conformance_reason(k) for k in known)
    for reason, times in reasons.most_common():
        print(f"  known x{times}: {reason}")
    for label, what in sorted(differences.items()):
        if label not in known:
            print(f"  DIFFERS {label}: {what[:300]}")
    assert len(runnable) > 1000, "fewer conformance expressions than expected: is tests/data/cel-spec complete?"
    unknown = {k: v for k, v in differences.items() if k not in known}
    assert not unknown, "\n".join(f"{k}: {v}" for k, v in unknown.items())
    stale = [p for p in KNOWN_CONFORMANCE if not any(k.startswith(p) for k in known)]
    assert not stale, f"no longer different, remove from KNOWN_CONFORMANCE: {stale}"


def test_kubernetes_library_expressions_give_the_same_answers(oracle):
    counts, differences, answers = _compare(oracle, [(source, source, {}) for source in LIBRARY])
    print(f"\nKubernetes-library expressions: {len(LIBRARY)}: same value {counts['same value']}, both error "
          f"{counts['both error']}, differ {counts['differ']} ({len(set(differences) & set(KNOWN_DIFFERENCES))} known)")
    for label, what in sorted(differences.items()):
        print(f"  {'known' if label in KNOWN_DIFFERENCES else 'DIFFERS'} {label}: {what[:200]}"
              + (f" -- {KNOWN_DIFFERENCES[label]}" if label in KNOWN_DIFFERENCES else ""))
    unknown = {k: v for k, v in differences.items() if k not in KNOWN_DIFFERENCES}
    stale = [k for k in KNOWN_DIFFERENCES if k in LIBRARY and k not in differences]
    assert not unknown, "\n".join(f"{k}: {v}" for k, v in unknown.items())
    assert not stale, f"no longer different, remove from KNOWN_DIFFERENCES: {stale}"


def test_the_comparison_tells_ints_from_doubles_and_values_apart(oracle):
    """The oracle and `same` must be able to fail: 4 is not 4.0, and a wrong value is a difference."""
    answer = oracle.one("[1, 3].sum()")
    assert answer["value"] == 4 and k8scel.same(4, answer["value"]) and not k8scel.same(4.0, answer["value"])
    assert k8scel.outcome("x", lambda: 5, answer)[0] == "differ"
    assert oracle.one("1 + 'a'")["compiled"] is False


def test_the_oracle_is_the_vap_environment(oracle):
    """What only the VAP environment of 1.37 has: typed `request` and `namespaceObject`, the authorizer, the 1.37
    libraries (lists v3, semver), and no cel.bind or math."""
    answers = {e: oracle.one(e, eval=False)["compiled"] for e in (
        "request.userInfo.username == ''", "request.nosuchfield", "namespaceObject.metadata.name == ''",
        "authorizer.group('').resource('pods').check('get').allowed()", "[1].sort() == [1]",
        "isSemver('1.0.0')", "cel.bind(x, 1, x)", "math.greatest(1, 2)", "undeclared + 1")}
    assert answers == {
        "request.userInfo.username == ''": True, "request.nosuchfield": False,
        "namespaceObject.metadata.name == ''": True,
        "authorizer.group('').resource('pods').check('get').allowed()": True, "[1].sort() == [1]": True,
        "isSemver('1.0.0')": True, "cel.bind(x, 1, x)": False, "math.greatest(1, 2)": False,
        "undeclared + 1": False}


# Declared aiadmit extensions (docs/policy-language.md, "not portable"): Kubernetes' error -> what the class is.
EXTENSIONS: dict[str, str] = {
    "undeclared reference to 'math'": "cel-go's math extension (math.greatest, math.abs, ...): not in Kubernetes 1.37",
    "undeclared reference to 'cel'": "cel.bind (cel-go's bindings extension): not in Kubernetes 1.37",
    "found no matching overload for 'reverse' applied to 'string.()'": "string reverse(): strings extension v3",
    "undeclared reference to 'existsOne'": "a one-variable existsOne (Kubernetes 1.37 has exists_one)",
    "found no matching overload for 'join' applied to 'list(int)": "join() of non-strings (aiadmit's join)",
}
# Leniencies left, by label (a conformance test) or expression (a probe) -> why.
KNOWN_LENIENT: dict[str, str] = {
    "[x.transformList(i, v, v), [1]]": "transformList()'s variables are of no type the checker knows",
    "optional.of(1) == optional.of('a')": "aiadmit's optionals carry no type of their value",
}

# Expressions at the corners of the rules (x and y are dyn variables): Kubernetes' verdict must be aiadmit's.
PROBES = [
    # equality, in, ?: and + take one type twice
    "1 == 1.0", "1 == 1u", "[1] == [1u]", "{'a': 1} == {'a': 1u}", "1 == null", "'a' == null", "null == x",
    "x == 1.0", "[1] == []", "[1] == [x]", "x.?y == null", "optional.none() == null", "optional.of(1) == 1",
    "1 in [1.0]", "'a' in [1]", "1 in {'a': 1}", "'a' in {'a': 1}", "x in [1]", "1 in x", "1 in []",
    "null in [1]", "[1].all(v, v in [1u])", "x ? 1 : 'a'", "true ? 1 : x", "true ? null : 'a'", "true ? 1 : 1.0",
    "true ? [1] : []", "true ? [1] : ['a']", "x ? [] : [1]", "[1] + ['a']", "[1] + []", "[1] + [x]", "1 < 1u",
    "x - 1 < 2.5",
    # overloads with fixed argument types
    "sets.contains([1], ['a'])", "sets.contains([1], [x])", "sets.contains([1], [])", "'abc'.indexOf(1)",
    "24.indexOf('2')", "x.indexOf('a')", "int(true)", "int('1')", "uint(true)", "double(true)", "string([1])",
    "string(true)", "bool(1)", "bytes(1)", "size(1)", "1.size()", "x.size()", "timestamp(true)", "timestamp(x)",
    "1.getHours()", "'a'.getHours()", "x.getHours()", 'quantity("1").sign()', 'sign(quantity("1"))',
    "[1, 2].join(',')",
    # homogeneous literals (a dyn variable is a type of its own; format() arguments are exempt)
    "[1, dyn(2)]", "[x, 1]", "['a', x.name]", "[x, x.y]", "[x, x - 1]", "{'a': x, 'b': 1}", "{x: 1, 'b': 1}",
    "x.map(v, [v.name, 'a'])", "[1, 2].map(v, [v, 1])", "[[1], ['a']]", "[[1], []]", "[[1], [x]]",
    "[{}, {'a': 1}]", "[null, 1]", "[?optional.of(1), 2]", "[?optional.of(1), 'a']", "{?'a': optional.of(1), 'b': 2}",
    "[optional.none(), optional.of(1)]", "dyn([1, 'a'])", "size([1, 'a'])", "'%s'.format([[1, 'a']])",
    "['%s'.format([1]), 'a']", "optional.of(1) == optional.of('a')", "[?x.?y, 1]", "['a', ?x.?y]",
    "{?'a': x.?b, 'c': 1}", "[x.map(v, v), [1]]", "[1, true ? x : 1]", "[1, duration('1s')]",
    "[x.transformList(i, v, v), [1]]", "[x.a, x.b]", "[x[0], 1]", "[1, int(x)]", "[x.size(), 1]", "[x + 1, 1]",
    "['a', x ? 'b' : 'c']", "[duration('1s'), duration('2s')]", "[1, 1u]", "{1: 'a', 1u: 'b'}",
    "string(null)", "int(null)", "bool(null)", "string(type(1))", "'%s'.format([{?'a': optional.of(1)}])",
    "'%s'.format([[?optional.of(1)]])", "'%s'.format([{'a': optional.of(1)}])", "'%s'.format([{'a': 1}])",
    # constant arguments Kubernetes' validators check
    "'%s %d'.format(['a', 1])", "'%d'.format([x])", "'%d %d'.format([1])", "'%d'.format([1, 2])",
    "'%d'.format([2.0])", "'%s'.format([optional.of(1)])", "'%x'.format([b'a'])", "'%.2f'.format(['NaN'])",
    "'%a'.format([1])", "'%s %s'.format(x)", "x.format([1, 'a'])", "duration('1h') == duration('60m')",
    "duration('1x')", "timestamp('nope')", "timestamp('10000-01-01T00:00:00Z')", "timestamp(1)",
    "'a'.matches('(')", "'%d'.format([duration('1s')])", "'%s'.format([timestamp(0)])",
    "'%d'.format([x.getHours() > 0 ? duration('1s') : duration('2s')])",
    # timestamps and durations are typed
    "duration(duration('1s'))", "timestamp(timestamp(0))", "-duration('1s')", "timestamp(0) - timestamp(0)",
    "timestamp(0) + duration('1s')", "duration('1s') + timestamp(0)", "duration('1s') - timestamp(0)",
    "timestamp(0) < duration('1s')", "duration('1s') * 2", "int(duration('1s'))", "double(duration('1s'))",
    "string(timestamp(0))", "duration('1s').getHours()", "duration('1s').getFullYear()",
    "timestamp(0).getFullYear('UTC')", "duration('1s').getHours('UTC')", "[duration('1s')].sum()",
    "[timestamp(0)].sum()", "[timestamp(0)].isSorted()", "size(duration('1s'))", "bool(duration('1s'))",
    "timestamp(0) == null", "true ? duration('1s') : null", "x + duration('1s')", "x - timestamp(0)",
    "x.getHours(1)", "duration(1)", "[1, duration('1s')]", "[duration('1s'), timestamp(1)]",
]


def _loads(source: str, names) -> bool:
    try:
        Expression(source, declarations={name: DYN for name in names})
    except CelError:
        return False
    return True


def _class(error: str):
    return next((reason for start, reason in EXTENSIONS.items() if start in error), None)


def test_aiadmit_rejects_what_kubernetes_rejects_but_its_declared_extensions(oracle):
    if not os.path.isdir(DATA):
        pytest.skip("tests/data/cel-spec is missing")
    cases, _ = _conformance_cases()
    cases += [(source, source, {}) for source in LIBRARY]
    cases += [(source, source, {"x": None, "y": None}) for source in PROBES]
    answers = oracle.ask([dict(expr=source, dynVars=sorted(b), eval=False) for _, source, b in cases])
    classes: Counter = Counter()
    lenient, unexplained, stricter, known_used = Counter(), [], [], set()
    for (label, source, bindings), answer in zip(cases, answers):
        loads = _loads(source, bindings)
        if answer["compiled"] and not loads and label in PROBES:
            stricter.append(label)
        if answer["compiled"] or not loads:
            continue
        lenient[label.split("/")[0] if "/" in label else "(probes and library)"] += 1
        error = answer["error"].splitlines()[0]
        found = _class(error)
        if found:
            classes[found] += 1
        elif label in KNOWN_LENIENT:
            known_used.add(label)
        else:
            unexplained.append(f"{label}: {source!r} -- Kubernetes: {error}")
    rejected = sum(1 for answer in answers if not answer["compiled"])
    print(f"\nKubernetes rejects {rejected} of {len(cases)} expressions; aiadmit loads {sum(lenient.values())} of them "
          f"(by file: {dict(lenient.most_common())}):")
    for reason, times in classes.most_common():
        print(f"  declared extension x{times}: {reason}")
    for label in sorted(known_used):
        print(f"  known leniency: {label}: {KNOWN_LENIENT[label]}")
    assert not unexplained, "aiadmit loads what Kubernetes rejects:\n" + "\n".join(unexplained)
    assert not stricter, f"aiadmit rejects what Kubernetes compiles: {stricter}"
    stale = [k for k in KNOWN_LENIENT if k not in known_used] + [
        r for r in EXTENSIONS.values() if r not in classes]
    assert not stale, f"no longer matched, remove: {stale}"


# Generated corners: every pair of these atoms through every operator, literal and conversion.
_ATOMS = ['1', '1u', '1.0', "'a'", "b'a'", 'true', 'null', 'x', 'x.y', '[1]', "['a']", '[]', '{}', "{'a': 1}", '[x]',
          'dyn(1)', 'optional.of(1)', "duration('1s')", 'timestamp(0)', "quantity('1')", 'type(1)', "ip('1.2.3.4')",
          '[1.0]', "{'a': x}", 'x.?y']
_PAIRS = ("{a} == {b}", "{a} != {b}", "{a} in {b}", "{a} < {b}", "{a} + {b}", "{a} - {b}", "{a} * {b}", "[{a}, {b}]",
          "{{'k': {a}, 'j': {b}}}", "true ? {a} : {b}", "{{{a}: 1, {b}: 2}}", "'%s %s'.format([{a}, {b}])")
_ONES = ("size({a})", "int({a})", "uint({a})", "double({a})", "string({a})", "bool({a})", "bytes({a})",
         "'%d'.format([{a}])", "'%f'.format([{a}])", "'%x'.format([{a}])", "'%b'.format([{a}])", "'%o'.format([{a}])",
         "'%e'.format([{a}])", "'%s'.format([{a}])", "timestamp({a})", "{a}.getHours()", "sets.contains([{a}], [1])",
         "[{a}].exists(v, v == 1)", "-{a}", "!{a}", "[?optional.of({a}), 1]", "{a}.indexOf('a')", "'abc'.indexOf({a})",
         "[1, 2].indexOf({a})")
# Where aiadmit may differ on them, by what its error or Kubernetes' says -> why.
GENERATED_STRICTER = {
    "cannot be a map key": "a map key of a type CEL has no keys of ({1.0: 1}, {[1]: 1}): always an error at run time "
                           "in Kubernetes, a load error in aiadmit",
    "applied to (null, ": "null ordered, added or subtracted (cel-go takes null as a timestamp or a duration): "
                          "always an error at run time in Kubernetes, a load error in aiadmit",
    ", null)": "the same, null on the right",
}
GENERATED_LENIENT = {
    "optional_type(": "aiadmit's optionals carry no type of their value",
}


def test_generated_corners_differ_from_kubernetes_only_where_listed(oracle):
    import itertools

    cases = [p.format(a=a, b=b) for a, b in itertools.product(_ATOMS, _ATOMS) for p in _PAIRS]
    cases += [one.format(a=a) for a in _ATOMS for one in _ONES]
    answers = oracle.ask([dict(expr=source, dynVars=["x"], eval=False) for source in cases])
    stricter, lenient, unexplained = Counter(), Counter(), []
    for source, answer in zip(cases, answers):
        try:
            Expression(source, declarations={"x": DYN})
            error = None
        except CelError as exc:
            error = exc.message
        if answer["compiled"] and error is not None:
            reason = next((r for k, r in GENERATED_STRICTER.items() if k in error), None)
            stricter[reason] += 1
            if reason is None:
                unexplained.append(f"stricter: {source} -- aiadmit: {error}")
        elif not answer["compiled"] and error is None:
            said = answer["error"].splitlines()[0]
            reason = next((r for k, r in GENERATED_LENIENT.items() if k in source or k in said), None)
            lenient[reason] += 1
            if reason is None:
                unexplained.append(f"lenient: {source} -- Kubernetes: {said}")
    print(f"\ngenerated corners: {len(cases)}; aiadmit stricter {sum(stricter.values())} {dict(stricter)}, more "
          f"lenient {sum(lenient.values())} {dict(lenient)}")
    assert not unexplained, "\n".join(unexplained)
    stale = [r for r in (*GENERATED_STRICTER.values(), *GENERATED_LENIENT.values()) if r not in stricter | lenient]
    assert not stale, f"no longer matched, remove: {stale}"
