"""Public Kyverno CEL policies run unchanged in aiadmit, in the shape of a ValidatingAdmissionPolicy.

The expressions and variables of 31 `validate.cel` ClusterPolicies from github.com/kyverno/policies (the Pod Security
set in CEL, part of best-practices-cel and other-cel; tests/data/kyverno-cel, with source and licence) are each written as an
aiadmit policy with `target: object`: VAP's `object`, `oldObject`, `request`, `namespaceObject`, and the rule's
`variables`, each reading the earlier ones as `variables.NAME`. Every expression must load (declared, checked and
costed as any policy), and each policy must pass a good Pod and deny a bad one (Pods written for this test from the
policy's description). A second test compares every variable's and expression's value with Kubernetes' own CEL
(tests/k8scel.py) on the same Pods. A difference from Kubernetes is listed in KNOWN with its reason; the list fails when stale."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import k8scel
from k8scel import oracle  # noqa: F401 - the fixture (built once per session)
from tests.testdata import DATA
from webhook.cel.checker import DYN
from webhook.cel.environment import Expression, new_context
from webhook.engine.core import Engine
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError
from webhook.model.resource import Resource

POLICIES = yaml.safe_load((Path(DATA) / "kyverno-cel" / "policies.yaml").read_text())["policies"]

# policy name -> why aiadmit does not load it or gives another verdict than Kubernetes would. Must stay exact.
KNOWN: dict[str, str] = {}


def _aiadmit_policy(policy: dict, rule: dict) -> dict:
    """One Kyverno rule as an aiadmit policy: the same variables and expressions, one rule per expression."""
    return {"apiVersion": "aiadmit.dev/v1alpha1", "kind": "Policy",
            "metadata": {"name": f"{policy['name']}-{rule['name']}".lower()},
            "summary": f"Kyverno {policy['name']}/{rule['name']}.", "why": "Pod Security.", "remediation": "See the message.",
            "action": "deny", "match": {"kinds": ["Pod"]}, "target": "object",
            **({"variables": rule["variables"]} if rule.get("variables") else {}),
            "rules": [{"name": f"e{position}", "expression": item["expression"], "message": item["message"]}
                      for position, item in enumerate(rule["expressions"])]}


def _pod(policy: dict, which: str) -> Resource:
    metadata = {"name": "p", "namespace": "team", **policy.get(f"{which}_metadata", {})}
    spec = policy[which]
    return Resource({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})


def _measure(tmp_path) -> tuple[dict, int, int]:
    """(policy name -> what went wrong, policies loaded, verdicts as expected)"""
    wrong: dict[str, str] = {}
    loaded = expected = 0
    for policy in POLICIES:
        paths = []
        for rule in policy["rules"]:
            path = tmp_path / f"{policy['name']}-{rule['name']}.yaml"
            path.write_text(yaml.safe_dump(_aiadmit_policy(policy, rule), sort_keys=False))
            paths.append(str(path))
        try:
            engine = Engine(load_policies(paths))
        except PolicyLoadError as exc:
            wrong[policy["name"]] = "load: " + "; ".join(exc.problems)
            continue
        loaded += 1
        good = engine.evaluate(_pod(policy, "good")).findings
        bad = engine.evaluate(_pod(policy, "bad")).findings
        problems = [f"good pod: {f.rule} {f.result}: {f.message}" for f in good]
        if not bad or any(f.result != policy.get("bad_result", "fail") for f in bad):
            problems.append(f"bad pod: {[(f.rule, f.result, f.message) for f in bad]}")
        if problems:
            wrong[policy["name"]] = "verdict: " + "; ".join(problems)
        else:
            expected += 1
    return wrong, loaded, expected


def test_kyverno_cel_policies_load_and_decide_as_in_kubernetes(tmp_path):
    wrong, loaded, expected = _measure(tmp_path)
    print(f"{loaded} of {len(POLICIES)} Kyverno CEL policies load; {expected} verdicts as expected")
    assert {name: problem for name, problem in wrong.items() if name not in KNOWN} == {}
    assert sorted(set(KNOWN) - set(wrong)) == [], "KNOWN is stale: these now load and decide as expected"


def test_the_data_names_its_source():
    assert len(POLICIES) >= 20 and len({p["name"] for p in POLICIES}) == len(POLICIES)
    for policy in POLICIES:
        assert len(policy["commit"]) == 40 and policy["source"].endswith(".yaml"), policy["name"]
        assert all(item["expression"].strip() for rule in policy["rules"] for item in rule["expressions"])


def _aiadmit_value(source: str, bindings: dict):
    def run():
        context = new_context()
        context.update(bindings)
        return Expression(source, declarations={"object": DYN, "variables": DYN}).run(context)
    return run


@pytest.mark.k8scel
def test_kyverno_cel_values_are_kubernetes_values(oracle):
    """Each variable (in order, reading the earlier ones) and each expression, on the good and the bad Pod, in
    aiadmit's CEL and in the ValidatingAdmissionPolicy environment of Kubernetes v1.37: the same value, or both an
    error. A variable that errors is left out of `variables` on both sides (Kubernetes raises it only when read)."""
    compared, differences = 0, {}
    for policy in POLICIES:
        for which in ("good", "bad"):
            pod = {"apiVersion": "v1", "kind": "Pod", "spec": policy[which],
                   "metadata": {"name": "p", "namespace": "team", **policy.get(f"{which}_metadata", {})}}
            for rule in policy["rules"]:
                ours, theirs = {}, {}
                items = [("variable " + v["name"], v["expression"], v["name"]) for v in rule.get("variables") or ()]
                items += [(f"expression {n}", e["expression"], None) for n, e in enumerate(rule["expressions"])]
                for label, source, name in items:
                    answer = oracle.one(source, vars={"object": pod, "variables": theirs})
                    run = _aiadmit_value(source, {"object": pod, "variables": dict(ours)})
                    verdict, what = k8scel.outcome(source, run, answer)
                    compared += 1
                    if verdict == "differ":
                        differences[f"{policy['name']}/{rule['name']} {which} {label}"] = what
                    if name is not None and "evalError" not in answer and answer["compiled"]:
                        theirs[name] = answer["value"]
                        try:
                            ours[name] = run()
                        except Exception:  # noqa: BLE001 - differs from Kubernetes: reported above
                            pass
    print(f"\n{compared} Kyverno CEL values compared with Kubernetes v1.37: {len(differences)} differ")
    assert not differences, "\n".join(f"{k}: {v}" for k, v in differences.items())
