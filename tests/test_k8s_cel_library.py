"""Kubernetes' CEL library cases (tests/data/k8s-cel-library/cases.yaml) on aiadmit's compiled CEL path.

The cases are the expressions of k8s.io/apiserver v0.37.2's pkg/cel/library tests and doc examples; each one's
expected answer is what Kubernetes 1.37 itself returned (README.md there says how it was recorded). A case passes
when aiadmit, on its compiled path (not the reference library), gives the same value of the same type, fails to
load where Kubernetes fails to compile, or raises where Kubernetes raises. Whether the error *message* is also
Kubernetes' is counted apart (`same message`). Counts per library are printed (`-s`) and must not fall below FLOOR.

    python3 -m pytest -q -s tests/test_k8s_cel_library.py
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
import yaml

import celspec

from webhook.cel.environment import CelError, Expression, new_context

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "k8s-cel-library")
CASES = os.path.join(HERE, "cases.yaml")
EDGE_CASES = os.path.join(HERE, "edge-cases.yaml")  # aiadmit's own expressions at the corners, Kubernetes' answers
# Passing cases per library, as measured (docs/policy-language.md): a regression below these fails.
FLOOR: dict[str, int] = {"cidr": 59, "format": 211, "ip": 74, "jsonpatch": 1, "lists": 21, "quantity": 63,
                         "regex": 5, "semver": 51, "urls": 29}


def _load(path: str) -> list:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def run(case: dict) -> tuple[str, bool]:
    """('pass' | 'fail: why' | 'skip: why', whether an expected error's message is Kubernetes' own)."""
    if "skip" in case:
        return "skip: " + case["skip"], False
    expected_error = case.get("compile_error") or case.get("error")
    try:
        expression = Expression(case["expr"], declarations={})  # nothing declared, as in the cases' environment
    except CelError as exc:
        if "compile_error" in case:
            return "pass", False
        if "error" in case:  # Kubernetes raises at run time; failing the load is stricter, and no less an error
            return "pass", case["error"] in str(exc)
        return f"fail: does not load: {exc}", False
    if "compile_error" in case:
        return "fail: loads, but Kubernetes rejects it at compile time", False
    try:
        native = expression.native
    except Exception as exc:  # noqa: BLE001 - the reference library refused what the native compiler left it
        return f"fail: not on the compiled path, and the reference library fails: {exc}", False
    if not native:
        return "fail: not on the compiled path", False
    try:
        got = expression.run(new_context())
    except Exception as exc:  # noqa: BLE001 - any evaluation error is a CEL error
        if expected_error:
            return "pass", case["error"] in str(exc)
        return f"fail: raised {exc}", False
    if expected_error:
        return f"fail: gave {got!r}, expected the error {expected_error!r}", False
    try:
        # a value written in CEL (`[1, "b", 2]`), not a rule: cel-go's checker, without Kubernetes' validators
        wanted = Expression(case["value"], kubernetes=False).run(new_context())
    except Exception as exc:  # noqa: BLE001 - the expected value needs what aiadmit lacks
        return f"fail: the expected value {case['value']} does not evaluate: {exc}", False
    return ("pass" if celspec.same_value(got, wanted) else f"fail: gave {got!r}, expected {case['value']}"), False


def results(path: str = CASES) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for case in _load(path):
        outcome, same_message = run(case)
        counts = out.setdefault(case["library"], Counter())
        counts[outcome if outcome == "pass" else outcome.split(":")[0]] += 1
        if outcome != "pass":
            counts[outcome] += 1
        if case["source"].endswith(("TestQuantity", "TestIP", "TestCIDR", "TestFormat", "TestSemver")):
            tables = out.setdefault("(table tests)", Counter())
            tables[outcome if outcome == "pass" else outcome.split(":")[0]] += 1
        if outcome == "pass" and (case.get("error")):
            counts["errors"] += 1
            counts["same message"] += same_message
    return out


def _table(found: dict[str, Counter]) -> str:
    lines = [f"{'library':<10} {'pass':>5} {'fail':>5} {'skip':>5}  runnable pass %  (errors with Kubernetes' message)"]
    for name, counts in sorted(found.items()):
        if name.startswith("("):
            continue
        runnable = counts["pass"] + counts["fail"]
        share = f"{100 * counts['pass'] / runnable:5.1f}" if runnable else "    -"
        lines.append(f"{name:<10} {counts['pass']:>5} {counts['fail']:>5} {counts['skip']:>5}  {share}"
                     f"            {counts['same message']}/{counts['errors']}")
    libraries = [c for name, c in found.items() if not name.startswith("(")]
    passed = sum(c["pass"] for c in libraries)
    runnable = passed + sum(c["fail"] for c in libraries)
    lines.append(f"all: {passed}/{runnable} runnable pass ({100 * passed / max(runnable, 1):.1f} %), "
                 f"{sum(c['skip'] for c in libraries)} skipped")
    if "(table tests)" in found:
        tables = found["(table tests)"]
        lines.append(f"the five table-test files alone: {tables['pass']}/{tables['pass'] + tables['fail']}")
    return "\n".join(lines)


# Passing edge cases per library (edge-cases.yaml): Go's parsers at their corners
EDGE_FLOOR: dict[str, int] = {"cidr": 39, "format": 74, "ip": 59, "jsonpatch": 3, "lists": 74, "quantity": 6,
                              "regex": 8, "semver": 45, "urls": 61}


@pytest.fixture(scope="module")
def library_results():
    return results()


def test_edge_cases_agree_with_kubernetes():
    found = results(EDGE_CASES)
    print("\nedge cases (aiadmit's expressions, Kubernetes' answers)\n" + _table(found))
    for name, floor in EDGE_FLOOR.items():
        assert found[name]["pass"] >= floor, f"{name}: {found[name]['pass']} pass, was {floor}"


def test_kubernetes_library_counts_do_not_regress(library_results):
    print("\n" + _table(library_results))
    for name, floor in FLOOR.items():
        assert library_results[name]["pass"] >= floor, f"{name}: {library_results[name]['pass']} pass, was {floor}"


def test_every_skip_has_a_reason(library_results):
    for name, counts in library_results.items():
        if name.startswith("("):
            continue
        skips = sum(v for k, v in counts.items() if k.startswith("skip: ") and len(k) > len("skip: "))
        assert skips == counts["skip"], name


def test_every_case_says_where_it_comes_from_and_what_kubernetes_answered():
    for case in _load(CASES) + _load(EDGE_CASES):
        assert case["source"] and case["expr"] and case["library"], case
        assert "skip" in case or sum(k in case for k in ("value", "error", "compile_error")) == 1, case


if __name__ == "__main__":  # the failures, to work on: python3 tests/test_k8s_cel_library.py [edge] [LIBRARY]
    import sys

    edge = sys.argv[1:2] == ["edge"]
    sys.argv[1:] = sys.argv[1 + edge:]
    for library, counts in sorted(results(EDGE_CASES if edge else CASES).items()):
        if len(sys.argv) > 1 and library != sys.argv[1]:
            continue
        for key, value in sorted(counts.items(), key=lambda kv: -kv[1]):
            if key.startswith(("fail: ", "skip: ")):
                print(library, value, key)


_HOSTILE = ("1" * 1_000_000, ":" * 1_000_000, "1." * 500_000, "%" * 1_000_000, "/a?" + "a=b&" * 250_000,
            "a/" * 500_000, "1:" * 500_000, "[" * 1_000_000, "1.2.3-" + "a." * 500_000, "f" * 999_999 + "/8")
_CALLS = ("isIP(s)", "isCIDR(s)", "isURL(s)", "isSemver(s)", "isSemver(s, true)", "jsonpatch.escapeKey(s).size()",
          "url('https://h' + s).getQuery().size() >= 0", "url('https://h/' + s).getEscapedPath().size() > 0",
          "format.dns1123Subdomain().validate(s).hasValue()", "format.qualifiedName().validate(s).hasValue()",
          "format.uri().validate(s).hasValue()", "format.datetime().validate(s).hasValue()",
          "format.byte().validate(s).hasValue()", "cidr('10.0.0.0/8').containsIP(s)")


@pytest.mark.parametrize("call", _CALLS)
def test_library_functions_are_linear_on_megabyte_inputs(call):
    """Bounded: a megabyte of the worst shapes for each parser answers within five seconds, on a loaded machine
    (a quadratic parser would take hours)."""
    import time

    expression = Expression(call, declarations={"s": "string"})
    for text in _HOSTILE:
        started = time.thread_time()
        try:
            expression.run({"s": text})
        except Exception:  # noqa: BLE001 - an error is an answer; only the time is measured
            pass
        assert time.thread_time() - started < 5.0, (call, text[:20])


@pytest.mark.parametrize("call", ["lists.range(1000000).distinct().size()", "lists.range(1000000).reverse().sort()[0]",
                                  "lists.range(1000000).slice(10, 999999).size()",
                                  "lists.range(100000).map(i, [i, [i, [i]]]).flatten(5).size()",
                                  "lists.range(100000).map(i, [i, 'a']).distinct().size()"])
def test_lists_extension_is_bounded_on_large_lists(call):
    """Bounded: up to a million items through the lists extension answer within five seconds (cel-go's distinct is
    quadratic; aiadmit's hashes). Five seconds of this thread's CPU, not of the wall clock: the bound is on work,
    and a loaded machine must not fail it."""
    import time

    started = time.thread_time()
    # mixed-type literals are the point here: cel-go's checker only (Kubernetes' validators would want dyn())
    Expression(call, declarations={}, kubernetes=False).run({})
    assert time.thread_time() - started < 5.0, call


def test_lists_range_is_bounded_in_memory():
    """lists.range() builds a list from nothing: a million items at most at run time, and a rule that would build
    more than about 4 million in all (a range inside a map over a range) does not load."""
    assert Expression("lists.range(1000).map(i, lists.range(1000)).size()", declarations={}).run({}) == 1000
    with pytest.raises(Exception, match=r"lists.range: size 1000000000 exceeds maximum allowed \(1000000\)"):
        Expression("lists.range(n)", declarations={"n": "int"}).run({"n": 10 ** 9})
    # cel-go v0.29 (Kubernetes 1.37) refuses a negative size too; 1.34 gave the empty list
    with pytest.raises(Exception, match="lists.range: size must be non-negative, got -3"):
        Expression("lists.range(n)", declarations={"n": "int"}).run({"n": -3})
    with pytest.raises(CelError, match="estimated cost"):
        Expression("lists.range(100000).map(i, lists.range(100000)).size()", declarations={})


def test_host_characters_are_go_hosts_on_every_code_point():
    """url()'s host check: ASCII letters, digits and Go's host punctuation, and every character from U+0080 on."""
    from webhook.cel import urls

    allowed = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!$&'()*+,;=:[]<>\"-_.~%")
    everything = "".join(chr(code) for code in range(0x110000))
    found = urls._NOT_HOST.findall(everything)
    assert found == [chr(code) for code in range(128) if chr(code) not in allowed]
    assert len(found) == 44
