"""Kubernetes' CEL library cases (tests/data/k8s-cel-library/cases.yaml) on aiadmit's compiled CEL path.

The cases are the expressions of k8s.io/apiserver v0.34.4's pkg/cel/library tests and doc examples; each one's
expected answer is what Kubernetes 1.34 itself returned (README.md there says how it was recorded). A case passes
when aiadmit, on its compiled path (not the reference library), gives the same value of the same type, fails to
load where Kubernetes fails to compile, or raises where Kubernetes raises. Whether the error *message* is also
Kubernetes' is counted apart (`same message`). Counts per library are printed (`-s`) and must not fall below FLOOR.

    python3 -m pytest -q -s tests/test_k8s_cel_library.py
"""

from __future__ import annotations

import math
import os
from collections import Counter

import pytest
import yaml

from webhook.cel.environment import CelError, Expression, new_context
from webhook.cel.runtime import Optional as Opt, equals

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "k8s-cel-library", "cases.yaml")
# Passing cases per library, as measured (docs/policy-language.md): a regression below these fails.
FLOOR: dict[str, int] = {"cidr": 59, "format": 211, "ip": 74, "jsonpatch": 1, "lists": 16, "quantity": 57,
                         "regex": 5, "semver": 51, "urls": 29}


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return len(a) == len(b) and all(any(_same(k, j) and _same(v, w) for j, w in b.items()) for k, v in a.items())
    if isinstance(a, Opt):
        return (a.value is None and b.value is None) if None in (a.value, b.value) else _same(a.value, b.value)
    try:
        return bool(equals(a, b))
    except Exception:  # noqa: BLE001 - values aiadmit cannot compare are not the same
        return False


def run(case: dict) -> tuple[str, bool]:
    """('pass' | 'fail: why' | 'skip: why', whether an expected error's message is Kubernetes' own)."""
    if "skip" in case:
        return "skip: " + case["skip"], False
    expected_error = case.get("compile_error") or case.get("error")
    try:
        expression = Expression(case["expr"])
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
        wanted = Expression(case["value"]).run(new_context())
    except Exception as exc:  # noqa: BLE001 - the expected value needs what aiadmit lacks
        return f"fail: the expected value {case['value']} does not evaluate: {exc}", False
    return ("pass" if _same(got, wanted) else f"fail: gave {got!r}, expected {case['value']}"), False


def results() -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for case in yaml.safe_load(open(CASES, encoding="utf-8")):
        outcome, same_message = run(case)
        counts = out.setdefault(case["library"], Counter())
        counts[outcome if outcome == "pass" else outcome.split(":")[0]] += 1
        if outcome != "pass":
            counts[outcome] += 1
        if "doc comment" not in case["source"] and "generated" not in case["source"]:
            tables = out.setdefault("(table tests)", Counter())
            tables[outcome if outcome == "pass" else outcome.split(":")[0]] += 1
        if outcome == "pass" and (case.get("error")):
            counts["errors"] += 1
            counts["same message"] += same_message
    return out


def _table(found: dict[str, Counter]) -> str:
    lines = [f"{'library':<10} {'pass':>5} {'fail':>5} {'skip':>5}  runnable pass %  (errors with Kubernetes' message)"]
    for name, counts in sorted(found.items()):
        runnable = counts["pass"] + counts["fail"]
        share = f"{100 * counts['pass'] / runnable:5.1f}" if runnable else "    -"
        lines.append(f"{name:<10} {counts['pass']:>5} {counts['fail']:>5} {counts['skip']:>5}  {share}"
                     f"            {counts['same message']}/{counts['errors']}")
    libraries = [c for name, c in found.items() if not name.startswith("(")]
    passed = sum(c["pass"] for c in libraries)
    runnable = passed + sum(c["fail"] for c in libraries)
    lines.append(f"all: {passed}/{runnable} runnable pass ({100 * passed / max(runnable, 1):.1f} %), "
                 f"{sum(c['skip'] for c in libraries)} skipped; the five table-test files alone: "
                 f"{found['(table tests)']['pass']}/{found['(table tests)']['pass'] + found['(table tests)']['fail']}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def library_results():
    return results()


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
    for case in yaml.safe_load(open(CASES, encoding="utf-8")):
        assert case["source"] and case["expr"] and case["library"], case
        assert "skip" in case or sum(k in case for k in ("value", "error", "compile_error")) == 1, case


if __name__ == "__main__":  # the failures, to work on: python3 tests/test_k8s_cel_library.py [LIBRARY]
    import sys

    for library, counts in sorted(results().items()):
        if len(sys.argv) > 1 and library != sys.argv[1]:
            continue
        for key, value in sorted(counts.items(), key=lambda kv: -kv[1]):
            if key.startswith(("fail: ", "skip: ")):
                print(library, value, key)
