"""Cost, against Kubernetes' own CEL (tests/tools/k8scel): what Kubernetes rejects, aiadmit rejects too.

A ValidatingAdmissionPolicy has no static cost check of its own (its variables are dyn, so cel-go's estimate is
unbounded); Kubernetes stops an expression at run time at celconfig.PerCallLimit (10^6 cost units) per
evaluation. So "Kubernetes rejects" here means: it does not compile, or its run over the hostile object of
tests/test_celbounds.py (400 containers) exceeds that limit. aiadmit must reject each such shape, at load (its
static estimate, webhook/cel/cost.py) or at run time (its step and size bounds), quickly.

The oracle's estimate bounds every value read from a variable by the API server's request size limit (3 MiB), as
aiadmit's does; the table compares the two estimates' orders of magnitude for the built-in expressions (printed,
not asserted: the models differ in what a step costs).

    python3 -m pytest -q -s tests/test_k8scel_cost.py
"""

from __future__ import annotations

import math
import time
from collections import Counter

import pytest

import k8scel
from k8scel import oracle  # noqa: F401 - the fixture (built once per session)
from webhook.cel import cost as costs
from webhook.cel.environment import CelError, Expression
from webhook.cel.parser import parse_with_positions
from webhook.engine.core import Engine
from webhook.language.declarations import CONTAINER

pytestmark = pytest.mark.k8scel

# The shapes of tests/test_celbounds.py (restated: a test module imports no other).
NESTED = ("pod.containers.all(a, pod.containers.all(b, pod.containers.all(c, "
          "a.name != 'x' && b.name != 'x' && c.name != 'x')))")
DOUBLING = "cel.bind(a, container.image + container.image, " + "".join(
    f"cel.bind({n}, {p} + {p}, " for p, n in zip("abcdefgh", "bcdefghi")) + "size(i) > 0" + ")" * 9
UNLIMITED = costs.Limits(per_expression=float("inf"), max_value_factor=float("inf"))


def _context() -> dict:
    """400 containers of 100-character images, and a container with a 100,000-character one."""
    return {"pod": {"containers": [{"name": f"c{i}", "image": "x" * 100} for i in range(400)]},
            "container": {"name": "c", "image": "y" * 100_000}}

# The hostile shapes of tests/test_celbounds.py, spelt so that Kubernetes can read them (join as a method).
HOSTILE = {
    "catastrophic regex": 'container.name.matches("(a+)+$")',
    "three nested all() over the containers": NESTED,
    "a string doubled in 9 cel.bind": DOUBLING,
    "a join bomb (three nested map/join)": "size(pod.containers.map(a, pod.containers.map(b, pod.containers.map(c, "
                                           "c.image).join(',')).join(',')).join(',')) > 0",
}
# Shown for what it says about the two limits, not asserted: Kubernetes' run-time limit stops a quadratic rule over
# 400 containers (160,000 iterations cost more than 10^6 units); aiadmit runs it within its 1,000,000-step bound.
INFORMATIVE = {"two nested all() over the containers (quadratic)":
               "pod.containers.all(a, pod.containers.all(b, a.name != b.name || a == b))"}


def _aiadmit_rejects(source: str, context: dict) -> str:
    """How aiadmit rejects `source` ('' when it does not): at load, else at run time (estimate lifted) within 2 s."""
    try:
        Expression(source, declarations=CONTAINER)
    except CelError as exc:
        return f"load: {exc.message[:90]}"
    started = time.perf_counter()
    try:
        Expression(source, declarations=CONTAINER, limits=UNLIMITED).run(context)
    except Exception as exc:  # noqa: BLE001 - the run-time bounds raise
        took = time.perf_counter() - started
        assert took < 2.0, f"{source}: aiadmit took {took:.1f} s to stop it"
        return f"run: {str(exc)[:90]} (the static estimate lifted)"
    return ""


def test_what_kubernetes_rejects_aiadmit_rejects(oracle):
    context = _context()
    rows, missed = [], []
    for name, source in {**HOSTILE, **INFORMATIVE}.items():
        answer = oracle.one(source, vars={k: context[k] for k in ("pod", "container")}, dynVars=["pod", "container"])
        if not answer["compiled"]:
            theirs = "does not compile: " + answer["error"].splitlines()[0][:70]
        elif "cost limit" in answer.get("evalError", ""):
            theirs = f"run-time cost limit (estimate {answer['cost']:.3g}, stopped at {answer['actualCost']})"
        else:
            theirs = ""
        ours = _aiadmit_rejects(source, context)
        rows.append((name, theirs or f"runs (estimate {answer.get('cost', 0):.3g}, actual {answer.get('actualCost')})",
                     ours or "runs"))
        if theirs and not ours and name in HOSTILE:
            missed.append(name)
    print()
    for name, theirs, ours in rows:
        print(f"  {name}\n    Kubernetes: {theirs}\n    aiadmit:    {ours}")
    assert not missed, f"Kubernetes rejects, aiadmit does not: {missed}"


def _estimate(builtin) -> float:
    tree, positions = parse_with_positions(builtin.expression.source)
    return costs.estimate(tree, positions, builtin.policy.params, costs.Limits(per_expression=math.inf))


def test_static_estimates_of_the_builtin_expressions_side_by_side(oracle):
    engine = Engine.load()
    found = [b for b in k8scel.builtins(engine) if not b.uses]
    answers = oracle.ask([dict(expr=b.expression.source, dynVars=k8scel.aiadmit_names(), eval=False) for b in found])
    ratios: Counter = Counter()
    lines, over = [], Counter()
    for builtin, answer in zip(found, answers):
        if not answer["compiled"]:
            continue
        ours, theirs = _estimate(builtin), answer["cost"]
        if theirs >= 2 ** 63:
            bucket = "Kubernetes unbounded (nested dyn ranges)"
        else:
            bucket = f"10^{round(math.log10(max(ours, 1)) - math.log10(max(theirs, 1))):+d}"
        ratios[bucket] += 1
        over["Kubernetes' estimate over 1e6"] += theirs > 1e6
        over["Kubernetes' estimate over 1e13"] += theirs > 1e13
        over["aiadmit's estimate over 1e6"] += ours > 1e6
        lines.append(f"  {builtin.key[:70]:<70} {ours:>10.3g} {float(theirs):>10.3g}  {bucket}")
    print(f"\n  {'expression':<70} {'aiadmit':>10} {'Kubernetes':>10}  aiadmit/Kubernetes")
    print("\n".join(lines))
    print(f"orders of magnitude (aiadmit over Kubernetes), {len(lines)} expressions: "
          f"{dict(sorted(ratios.items()))}; Kubernetes' per-call run-time limit: 1e+06, aiadmit's load limit "
          f"{costs.Limits().per_expression:.0e}; {dict(over)}")
    assert lines
