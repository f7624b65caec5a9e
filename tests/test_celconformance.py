"""The official CEL conformance tests (tests/data/cel-spec, from google/cel-spec) on aiadmit's compiled CEL path.

Every test of every file is run or skipped with a reason; the counts per file are printed (`-s`) and must not
fall below the figures recorded in docs/policy-language.md (FLOOR): a change that breaks conformance fails here.
"Compiled path": the expression must compile natively (webhook/cel/compiler.py), not through the reference
library. Skipped, by reason: protobuf message types and enums (aiadmit evaluates JSON-shaped data), a `container`
(protobuf namespaces), type-check-only or type-deduction expectations, unknown sets, macros disabled.
The suite is written for cel-go's checker, so it runs without Kubernetes' literal validators (homogeneous list and
map literals, constant durations, timestamps and format strings: cel/strictness.py); how many passing tests those
validators reject at load, as Kubernetes' environment and every aiadmit policy does, is counted per file apart.

    python3 -m pytest -q -s tests/test_celconformance.py
"""

from __future__ import annotations

import glob
import os
from collections import Counter

import pytest

import celspec
from webhook.cel.checker import DYN
from webhook.cel.environment import CelError, Expression, new_context

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cel-spec", "testdata")
CORE = ("basic", "comparisons", "conversions", "dynamic", "fields", "fp_math", "integer_math", "lists", "logic",
        "macros", "macros2", "namespace", "parse", "plumbing", "string", "timestamps", "type_deduction",
        "unknowns", "wrappers", "enums", "proto2", "proto3")
KUBERNETES_EXTENSIONS = ("string_ext", "optionals", "bindings_ext", "math_ext", "network_ext")  # cel-go libraries Kubernetes enables
# Passing tests per file, as measured (docs/policy-language.md): a regression below these fails.
FLOOR: dict[str, int] = {
    "basic": 42, "bindings_ext": 6, "comparisons": 330, "conversions": 87, "fields": 60, "fp_math": 30,
    "integer_math": 64, "lists": 39, "logic": 25, "macros": 44, "macros2": 46, "math_ext": 199, "namespace": 3,
    "network_ext": 67, "optionals": 59, "parse": 176, "plumbing": 5, "string": 51, "string_ext": 212,
    "timestamps": 73,
}


def declarations(test: dict):
    """The test's `type_env` variables (each as dyn: aiadmit's data is JSON-shaped), None (any name) without one.

    Declared, the checker resolves a qualified name `a.b.c` against them as the spec's name resolution says."""
    names = [celspec._one(env, "name").decode() for env in test.get("type_env", []) if "ident" in env]
    return {name: DYN for name in names} if names else None


def run(test: dict):
    """'pass', 'fail: why' or 'skip: why'."""
    reason = celspec.skip_reason(test)
    if reason:
        return "skip: " + reason
    expr = test["expr"][0].decode("utf-8", "surrogatepass")
    try:
        context = new_context()
        for binding in test.get("bindings", []):
            context[celspec._one(binding, "key").decode()] = celspec.value(
                celspec._one(celspec._one(binding, "value"), "value"))
        expected_error = "eval_error" in test or "any_eval_errors" in test
        expected = None if expected_error else (
            celspec.value(test["value"][0]) if "value" in test else True)
    except celspec.Unrepresentable as exc:
        return f"skip: {exc} (no such value in aiadmit's data model)"
    try:
        expression = Expression(expr, declarations=declarations(test), kubernetes=False)
    except CelError as exc:
        if expected_error:
            return "pass"
        if test.get("disable_check", ["false"])[0] == "true" and "parse" not in exc.message:
            return ("skip: the test disables type checking; aiadmit checks every expression at load, as Kubernetes "
                    "does, and rejects this one")
        return f"fail: does not load: {exc}"
    try:
        native = expression.native
    except Exception as exc:  # noqa: BLE001 - the reference library refused what the native compiler left it
        return f"fail: not on the compiled path, and the reference library fails: {exc}"
    if not native:
        return "fail: not on the compiled path (the reference library would run it)"
    try:
        got = expression.run(context)
    except Exception as exc:  # noqa: BLE001 - any evaluation error is a CEL error
        return "pass" if expected_error else f"fail: raised {exc}"
    if expected_error:
        return f"fail: gave {got!r}, expected an error"
    return "pass" if celspec.same_value(got, expected) else f"fail: gave {got!r}, expected {expected!r}"


def kubernetes_rejects(test: dict) -> bool:
    """Whether Kubernetes' literal validators reject at load a test cel-go's checker accepts (`[1, 'a']`)."""
    try:
        Expression(test["expr"][0].decode("utf-8", "surrogatepass"), declarations=declarations(test))
    except CelError:
        return True
    return False


def results() -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for path in sorted(glob.glob(os.path.join(DATA, "*.textproto"))):
        name = os.path.basename(path)[:-len(".textproto")]
        counts: Counter = Counter()
        document = celspec.parse(open(path, encoding="utf-8").read())
        for section in document.get("section", []):
            for test in section.get("test", []):
                outcome = run(test)
                counts[outcome if outcome == "pass" else outcome.split(":")[0]] += 1
                if outcome == "pass" and kubernetes_rejects(test):
                    counts["kubernetes rejects"] += 1
                if outcome != "pass":
                    counts[outcome] += 1
        out[name] = counts
    return out


def _table(found: dict[str, Counter]) -> str:
    lines = [f"{'file':<16} {'pass':>5} {'fail':>5} {'skip':>5}  runnable pass %  (passing, Kubernetes rejects)"]
    for name, counts in found.items():
        runnable = counts["pass"] + counts["fail"]
        share = f"{100 * counts['pass'] / runnable:5.1f}" if runnable else "    -"
        rejects = f"  {counts['kubernetes rejects']:>5}" if counts["kubernetes rejects"] else ""
        lines.append(f"{name:<16} {counts['pass']:>5} {counts['fail']:>5} {counts['skip']:>5}  {share}{rejects}")
    for group, names in (("core", CORE), ("kubernetes ext", KUBERNETES_EXTENSIONS)):
        passed = sum(found[n]["pass"] for n in names if n in found)
        runnable = passed + sum(found[n]["fail"] for n in names if n in found)
        lines.append(f"{group}: {passed}/{runnable} runnable pass ({100 * passed / max(runnable, 1):.1f} %)")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def conformance():
    if not os.path.isdir(DATA):
        pytest.skip("tests/data/cel-spec is missing")
    return results()


def test_conformance_counts_per_file_do_not_regress(conformance):
    print("\n" + _table(conformance))
    for name, floor in FLOOR.items():
        assert conformance[name]["pass"] >= floor, f"{name}: {conformance[name]['pass']} pass, was {floor}"


def test_every_skip_has_a_reason(conformance):
    for name, counts in conformance.items():
        skips = sum(v for k, v in counts.items() if k.startswith("skip: "))
        assert skips == counts["skip"], name


if __name__ == "__main__":  # the failures, to work on: python3 tests/test_celconformance.py FILE
    import sys

    for key, value in sorted(results()[sys.argv[1]].items(), key=lambda kv: -kv[1]):
        print(value, key)
