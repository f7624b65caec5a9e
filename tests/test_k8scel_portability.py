"""The portability claim, checked with Kubernetes' own CEL (tests/tools/k8scel, the VAP environment of v1.37:
what a 1.37 API server accepts in a new expression).

docs/policy-language.md says a rule written with CEL-standard and Kubernetes functions only moves to a
ValidatingAdmissionPolicy unchanged, apart from the variable names aiadmit adds. So every expression of every
built-in policy that uses none of the declared aiadmit extensions (the docs' table: formatBytes, glob, maxOf, minOf,
least, greatest, quotaSelects, the sum(list)/join(list, sep)/lowerAscii(s) spellings, operators on quantities,
quantity() of a number; found by aiadmit's own checker, tests/k8scel.py `extension_uses`) must compile in
Kubernetes' environment, with aiadmit's variables (`workload`, `pod`, `container`, ...) declared dyn and `params`
the policy's params object, as a VAP's paramKind would be. Then each such expression is run over every object of
the corpus, bound as the engine binds it, by both, and the answers compared.

    python3 -m pytest -q -s tests/test_k8scel_portability.py      # -m 'not k8scel' leaves the oracle tests out
"""

from __future__ import annotations

from collections import Counter

import pytest

import k8scel
from k8scel import oracle  # noqa: F401 - the fixture (built once per session)
from testdata import CORPUS
from webhook.cel.environment import new_context
from webhook.engine.binding import bind_resource, bind_variables, enter
from webhook.engine.core import Engine
from webhook.inputs.sources import load_paths
from webhook.model.facts import OfflineFacts

pytestmark = pytest.mark.k8scel

# Built-in expressions that use no declared aiadmit extension and still do not compile in Kubernetes' environment:
# each is a portability bug of the policy (the function exists in Kubernetes, but not in this form). The list only
# shrinks: an entry that compiles again fails the test until it is removed here. Measured on 2026-12-01.
KNOWN_NOT_PORTABLE: set = set()  # emptied on 2026-12-01: `sign(q)` as a function, no `.sum()` of quantities

# Corpus answers where aiadmit and Kubernetes differ for a known reason: Kubernetes' error text -> the reason.
KNOWN_DIFFERENCES: dict[str, str] = {
    "no such overload: quantity(int)": (
        "quantity() of a number, aiadmit's declared extension: the corpus is YAML as written (`nvidia.com/gpu: 1`); "
        "the API server would have stored the string \"1\", which Kubernetes' quantity() takes"),
    # The corpus comparison hands Kubernetes the values aiadmit computed for the named variables, as JSON: a
    # variable holding a quantity (aiadmit carries it as its number) arrives as a double. Each variable's own
    # expression is compared on its own, so this is the harness's limit, not a difference of the rule.
    "no such overload: isLessThan(kubernetes.Quantity, double)": "a quantity-valued variable handed over as JSON",
    "no such overload: sign(double)": "a quantity-valued variable handed over as JSON",
}

ENGINE = Engine.load()


@pytest.fixture(scope="module")
def compiled(oracle):
    """Each built-in expression with Kubernetes' compile answer."""
    found = k8scel.builtins(ENGINE)
    names = k8scel.aiadmit_names()
    answers = oracle.ask([dict(expr=b.expression.source, dynVars=names, eval=False) for b in found])
    return list(zip(found, answers))


def test_every_portable_builtin_expression_compiles_in_kubernetes(compiled):
    counts: Counter = Counter()
    failures, stale, extension_compiles = [], [], []
    for builtin, answer in compiled:
        portable = not builtin.uses
        counts[("portable" if portable else "uses an extension", answer["compiled"])] += 1
        if portable and not answer["compiled"] and builtin.key not in KNOWN_NOT_PORTABLE:
            failures.append(f"{builtin.key}: {answer['error'].splitlines()[0]}")
        if builtin.key in KNOWN_NOT_PORTABLE and (answer["compiled"] or not portable):
            stale.append(builtin.key)
        if not portable and answer["compiled"]:
            extension_compiles.append(f"{builtin.key} ({', '.join(sorted(builtin.uses))})")
        # A VAP validation (and a matchCondition) must be a bool, a messageExpression a string: Kubernetes checks it.
        wanted = "bool" if builtin.where.endswith((".expression", ".when")) else \
            "string" if builtin.where.endswith(".messageExpression") else None
        if answer["compiled"] and wanted and answer["outputType"] not in (wanted, "dyn"):
            failures.append(f"{builtin.key}: Kubernetes types it {answer['outputType']}, a VAP needs {wanted}")
    missing = KNOWN_NOT_PORTABLE - {b.key for b, _ in compiled}
    uses = Counter(u for b, _ in compiled for u in b.uses)
    print(f"\nbuilt-in expressions: {len(compiled)}; portable (no declared extension): "
          f"{counts[('portable', True)] + counts[('portable', False)]}, of which compile in Kubernetes "
          f"{counts[('portable', True)]}, do not {counts[('portable', False)]} (known: {len(KNOWN_NOT_PORTABLE)})")
    print(f"using an aiadmit extension: {counts[('uses an extension', True)] + counts[('uses an extension', False)]}"
          f" (rejected by Kubernetes {counts[('uses an extension', False)]}, compiled anyway "
          f"{counts[('uses an extension', True)]}); extensions used: {dict(uses.most_common())}")
    for line in extension_compiles:
        print("  uses an extension, yet compiles:", line)
    assert not failures, "portable built-in expressions Kubernetes rejects:\n" + "\n".join(failures)
    assert not stale and not missing, (
        f"remove from KNOWN_NOT_PORTABLE (now compiles, uses an extension, or no such expression): "
        f"{sorted(stale) + sorted(missing)}")


def _corpus():
    loaded = load_paths([CORPUS])
    by_file: dict = {}
    for resource in loaded.resources:
        by_file.setdefault(resource.origin.file, []).append(resource)
    facts = {file: OfflineFacts(resources) for file, resources in by_file.items()}
    return [(resource, facts[resource.origin.file]) for resource in loaded.resources]


def _requests(builtins, context, policy, level, names):
    """(builtin, context snapshot reader, request) for each builtin of `policy` at `level` in this binding."""
    out = []
    for builtin in builtins.get((policy.id, level), ()):
        expression = builtin.expression
        variables = {}
        try:
            for name in expression.variables:
                if name == "variables":
                    named = {}
                    for variable in policy.named:
                        try:
                            named[variable] = context["variables"].get(variable)
                        except Exception:  # noqa: BLE001 - an erroring variable is absent for Kubernetes too
                            pass
                    variables[name] = k8scel.jsonable(named)
                elif name in context:
                    variables[name] = k8scel.jsonable(context[name])
            variables["params"] = k8scel.jsonable(policy.params)
        except (TypeError, ValueError):
            continue  # a value with no JSON form (never, for what the engine binds; counted as not compared)
        run = (lambda e, c: lambda: e.run(c))(expression, dict(context))
        out.append((builtin, run, dict(expr=expression.source, vars=variables, dynVars=names)))
    return out


def test_portable_builtin_expressions_give_kubernetes_answers_over_the_corpus(oracle, compiled):
    names = k8scel.aiadmit_names()
    portable: dict = {}
    for builtin, answer in compiled:
        if not builtin.uses and answer["compiled"]:
            portable.setdefault((builtin.policy.id, builtin.level), []).append(builtin)
    classification = ENGINE.config.classification
    pending = []
    for resource, facts in _corpus():
        scope, chosen = ENGINE.scope(resource, facts)
        if not chosen:
            continue
        for policy in chosen:
            context = new_context()
            bind_resource(context, scope, chosen, classification)
            bind_variables(context, policy)
            pending += _requests(portable, context, policy, "object", names)
            templates = scope.workload.templates if scope.workload else []
            for position, template in enumerate(templates):
                enter(context, scope, template, position, None, classification)
                bind_variables(context, policy)
                pending += _requests(portable, context, policy, "pod", names)
                for container in template.containers:
                    if not policy.takes(container):
                        continue
                    enter(context, scope, template, position, container, classification)
                    bind_variables(context, policy)
                    pending += _requests(portable, context, policy, "container", names)
    answers = oracle.ask([request for _, _, request in pending])
    counts: Counter = Counter()
    differences: dict = {}
    for (builtin, run, _), answer in zip(pending, answers):
        verdict, what = k8scel.outcome(builtin.expression.source, run, answer)
        counts[what if verdict == "agree" else "differ"] += 1
        if verdict == "differ":
            differences.setdefault(builtin.key, Counter())[what] += 1
    def cause(what: str):
        return next((reason for text, reason in KNOWN_DIFFERENCES.items() if what.endswith(text)), None)

    known = {k: v for k, v in differences.items() if all(map(cause, v))}
    unknown = {k: [w for w in v if not cause(w)] for k, v in differences.items() if k not in known}
    print(f"\ncorpus: {len(pending)} evaluations of {sum(map(len, portable.values()))} portable expressions: "
          f"same value {counts['same value']}, both error {counts['both error']}, differ {counts['differ']} "
          f"({len(known)} expressions for a known reason, {len(unknown)} not)")
    for key, whats in sorted(differences.items()):
        for what, times in whats.items():
            print(f"  {'known' if cause(what) else 'DIFFERS'} {key} (x{times}): {what[:300]}" +
                  (f" -- {cause(what)}" if cause(what) else ""))
    assert pending, "no corpus evaluation at all: the binding walk found nothing"
    assert not unknown, "aiadmit and Kubernetes differ:\n" + "\n".join(f"{k}: {v}" for k, v in unknown.items())
    stale = [text for text in KNOWN_DIFFERENCES if not any(w.endswith(text) for v in differences.values() for w in v)]
    assert not stale, f"no longer different, remove from KNOWN_DIFFERENCES: {stale}"
