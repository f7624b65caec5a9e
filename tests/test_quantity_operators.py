"""Quantities as Kubernetes has them: methods, no operators.

Kubernetes' CEL rejects `<`, `==` against a number, `+`, `*` ... on a quantity at compile time, so a rule that used
aiadmit's old quantity-operators extension could not move to a ValidatingAdmissionPolicy. Each is now a load error
that names the method to use, at the operator's column as the author wrote it (params folded in later do not move
it).
"""

from __future__ import annotations

import pytest

from webhook.cel.environment import CelError, Expression

COMPARE, ARITHMETIC = "compare with isLessThan/isGreaterThan/compareTo", "use asApproximateFloat() or asInteger()"
CASES = [  # (expression, the operator's 0-based offset, words the error must say)
    ('quantity("1Gi") < quantity("2Gi")', 16, f"quantities {COMPARE}, not <"),
    ('quantity("1Gi") <= params.limit', 16, f"{COMPARE}, not <="),
    ('quantity("1Gi") > 0.0', 16, f"{COMPARE}, not >"),
    ('quantity("1Gi") >= 1', 16, f"{COMPARE}, not >="),
    ('quantity("1") + quantity("2") == quantity("3")', 14, "add and subtract with add()/sub(), not +"),
    ('quantity("1").sub(quantity("2")) == quantity("3") - quantity("4")', 50, "add()/sub(), not -"),
    ('quantity("1") * params.fraction == quantity("1")', 14, f"{ARITHMETIC} and compute, not *"),
    ('quantity("1") / 2.0 == quantity("1")', 14, f"{ARITHMETIC} and compute, not /"),
    ('quantity("4") % 2 == 0', 14, f"{ARITHMETIC} and compute, not %"),
    ('quantity("1") == 1', 14, "equal only quantities: use compareTo(...) == 0, not =="),
    ('1.0 != quantity("1")', 4, "equal only quantities: use compareTo(...) == 0, not !="),
    ('dyn(1) < quantity("2")', 7, f"{COMPARE}, not <"),
    ('-quantity("1") == quantity("0")', 0, "sub()"),
    ('[quantity("1")].exists(q, q > 0.5)', 28, f"{COMPARE}, not >"),
]


@pytest.mark.parametrize("source,offset,words", CASES, ids=[c[0] for c in CASES])
def test_each_operator_on_a_quantity_fails_the_load_with_the_method_to_use(source, offset, words):
    with pytest.raises(CelError) as caught:
        Expression(source, params={"limit": "4Gi", "fraction": 0.25})
    assert words in caught.value.message
    assert caught.value.offset == offset, (caught.value.offset, source[caught.value.offset:])


@pytest.mark.parametrize("source,expected", [
    ('quantity("1Gi").isLessThan(quantity("2Gi"))', True),
    ('quantity("1").compareTo(quantity("1000m")) == 0', True),
    ('quantity("1") == quantity("1000m")', True),   # Kubernetes' Quantity equality: by value
    ('quantity("1").add(quantity("500m")).isGreaterThan(quantity("1"))', True),
    ('quantity("2").add(1).asInteger() == 3', True),  # add(int) and sub(int): Kubernetes' int overloads
    ('sign(quantity("2").sub(3)) == -1', True),
    ('quantity("1Gi").asApproximateFloat() * 0.25 == 268435456.0', True),
    ('quantity(params.limit).isGreaterThan(quantity("1Gi"))', True),
])
def test_the_methods_do_what_the_operators_did(source, expected):
    from webhook.cel.environment import new_context

    assert Expression(source, params={"limit": "4Gi"}).run(new_context()) is expected


@pytest.mark.parametrize("source", ['quantity("1").add(0.5)', 'quantity("1").isLessThan(2.0)',
                                    'quantity("1").compareTo(1) == 0'])
def test_a_number_is_not_a_quantity_where_a_method_takes_one(source):
    with pytest.raises(CelError, match="no matching overload"):
        Expression(source, params={})
