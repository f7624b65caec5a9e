"""Kubernetes 1.37's CEL and its version gating, checked against Kubernetes itself (tests/tools/k8scel, v0.37.2).

1. The gating: for each supported version, aiadmit's load-time portability check (a policy's `kubernetesVersion`,
   cel/portability.py) refuses exactly what that API server's new-expression environment (its default
   compatibility version, one minor below its own) refuses, for the library-gated features; the oracle's stored
   environment (what a 1.37 API server runs) has them. Parser syntax is the binary's: the oracle speaks for 1.37
   only (1.35 and 1.36, cel-go v0.26, were measured once: tests/test_kubernetes_versions.py).
2. The corners where Kubernetes 1.37 (cel-go v0.29.2, k8s.io/apiserver v0.37.2) answers otherwise than 1.34-1.36,
   generated: `includes` over every kind of target and value, quantity add/sub on every form of quantity (1.37
   stopped them mutating their receiver), lists.range's bounds, backquoted field names. aiadmit must give 1.37's
   value, or an error where it errors.

    python3 -m pytest -q -s tests/test_k8scel_versions.py
"""

from __future__ import annotations

import itertools

import pytest

import k8scel
from k8scel import oracle  # noqa: F401 - the fixture (built once per session)
from webhook.cel.environment import CelError, Expression, new_context
from webhook.k8s import versions

pytestmark = pytest.mark.k8scel

GATED = {"includes": "[1, 2].includes(2)", "backquoted": "{'b-c': 1}.`b-c` == 1"}


@pytest.mark.parametrize("server", [v.name for v in versions.SUPPORTED])
def test_the_portability_check_refuses_what_that_api_server_refuses(oracle, server):
    version = versions.version(server)
    for name, source in GATED.items():
        feature = versions.FEATURES[name]
        if feature.library is None and version is not versions.REFERENCE:
            continue  # the parser of 1.35/1.36 (cel-go v0.26) is not in this oracle
        answer = oracle.one(source, compatibility=f"1.{version.new_expressions}", environment="new")
        try:
            Expression(source, portable=version)
            loads = True
        except CelError:
            loads = False
        assert loads is answer["compiled"] is feature.accepted_new_by(version), (server, source, answer)


def test_a_1_37_api_server_runs_what_it_refuses_new(oracle):
    for name, source in GATED.items():
        stored = oracle.one(source, environment="stored")
        assert stored["compiled"] and stored["value"] is True, stored
        assert versions.FEATURES[name].runs_on(versions.REFERENCE)
    # and with --min-compatibility-version=1.37 (a new expression at compatibility version 1.37) it accepts it new
    assert oracle.one(GATED["includes"], compatibility="1.37")["compiled"] is True
    assert oracle.one(GATED["includes"])["env"] == "NewExpressions@1.36"  # the oracle's default: a 1.37 server's


TARGETS = ["[1, 2, 3]", "[dyn(1), dyn('a'), dyn(null)]", "[[1, 2], [3]]", "[{'a': 1}]", "[]", "{'a': 1}", "'abc'",
           "1", "1.0", "null", "[1.0, 2u]", "lists.range(3)"]
VALUES = ["1", "1.0", "1u", "'a'", "'abc'", "null", "[1, 2]", "{'a': 1}", "2", "dyn(3)"]
QUANTITIES = ['quantity("1")', 'quantity("1e30")', 'quantity("99999999999999999999")', 'quantity("1.5Gi")',
              'quantity("500m")', 'quantity("9223372036854775807")', 'quantity("1Ei")', 'quantity("0.1")']


# Where aiadmit's answer is not Kubernetes' 1.37 one, and why (each must still differ: the list only shrinks).
KNOWN = {
    "[quantity('1')].includes(1.0)": "aiadmit carries a quantity as its number, so it equals the double 1.0; "
                                     "Kubernetes' Quantity equals no double",
}


def _corners() -> list[str]:
    found = [f"{t}.includes({v})" for t, v in itertools.product(TARGETS, VALUES)]
    for q, r in itertools.product(QUANTITIES, repeat=2):
        found += [f"[{q}].all(x, x.add({r}).compareTo(x) == {r}.compareTo(quantity('0')))",  # x itself unchanged
                  f"[{q}].map(x, [x.sub({r}).compareTo(x), x.compareTo({q})])",
                  f"{q}.add({r}).sub({r}).compareTo({q})"]
    found += [f"[{q}].map(x, [x.add(1).isGreaterThan(x), x.sub(1).isLessThan(x)])" for q in QUANTITIES]
    # (a range near the bound costs Kubernetes its run-time limit of 10^6 before it is built: docs, "Cost")
    found += [f"lists.range({n}).size()" for n in (-1, 0, 1, 5000, 1000001, 9223372036854775807)]
    found += ["{'b-c': 1}.`b-c`", "has({'b-c': 1}.`b-c`)", "has({'b-c': 1}.`x`)", "{'a.b': {'c': 2}}.`a.b`.c",
              "[{'z': 0}].exists(y, y.z == 0)"]
    return found + list(KNOWN)


def test_aiadmit_gives_kubernetes_1_37s_answers_at_the_corners(oracle):
    corners = _corners()
    answers = oracle.ask([{"expr": e, "environment": "stored"} for e in corners])
    outcomes = {}
    differ = []
    for source, answer in zip(corners, answers):
        verdict, what = k8scel.outcome(source, lambda s=source: Expression(s).run(new_context()), answer)
        outcomes[verdict] = outcomes.get(verdict, 0) + 1
        if (verdict != "agree") != (source in KNOWN):
            differ.append(f"{source}: {what}" if source not in KNOWN else f"{source}: agrees now, remove from KNOWN")
    print(f"\n{len(corners)} corners of Kubernetes 1.37's CEL: {outcomes} ({len(KNOWN)} known: {list(KNOWN)})")
    assert not differ, "\n".join(differ)
    assert len(corners) >= 300
