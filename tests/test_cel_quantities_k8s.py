"""CEL's quantity() as Kubernetes reads it (webhook/cel/quantities.py): each answer below is what the Kubernetes
oracle (tests/tools/k8scel, k8s.io/apiserver v0.34.4) gave on 2026-12-01, and v0.37.2 (Kubernetes 1.37) again on
2026-12-02 (all 47 the same), kept here so no Go is needed."""

from __future__ import annotations

import pytest

from webhook.cel.environment import Expression, new_context
from webhook.cel.quantities import Quantity

ERROR = object()


def _run(source: str):
    return Expression(source).run(new_context())


@pytest.mark.parametrize("source, expected", [
    # a number-less quantity is 0; spaces are not allowed; a lone suffix with no int64 fast path is an error
    ('quantity("Gi").asInteger()', 0), ('isQuantity("Mi")', True), ('quantity("-").asInteger()', 0),
    ('quantity(".Gi").isInteger()', True), ('quantity("+.e3").asApproximateFloat()', 0.0),
    ('quantity("Pi")', ERROR), ('quantity(" 1")', ERROR), ('quantity("1 ")', ERROR), ('quantity("1e")', ERROR),
    ('isQuantity("K")', False), ('quantity("1.").asApproximateFloat()', 1.0),
    # integers: only the int64 form at a non-negative scale
    ('quantity("1000m").isInteger()', False), ('quantity("1.0").asInteger()', ERROR), ('quantity("0.0").isInteger()',
                                                                                        False),
    ('quantity("1Pi").isInteger()', False), ('quantity("1Ti").asInteger()', 1099511627776),
    ('quantity("1.5Gi").asInteger()', ERROR), ('quantity("123456789012345678").asInteger()', 123456789012345678),
    ('quantity("1234567890123456789").isInteger()', False), ('quantity("9223372036854775807").isInteger()', False),
    ('quantity("9e18").asInteger()', 9000000000000000000), ('quantity("10e18").isInteger()', False),
    ('quantity("00001.500000k").isInteger()', False), ('quantity("1e4294967296").asInteger()', 1),
    # beyond int64: kept (decimal), capped (binary SI), compared exactly
    ('quantity("9223372036854775808").isInteger()', False), ('quantity("9223372036854775808").asInteger()', ERROR),
    ('quantity("9223372036854775808").asApproximateFloat()', 9.223372036854776e18),
    ('quantity("99999999999999999999").compareTo(quantity("99999999999999999998"))', 1),
    ('quantity("9223372036854775808").compareTo(quantity("9223372036854775807"))', 1),
    ('quantity("10Ei").compareTo(quantity("9223372036854775807"))', 0),
    ('quantity("99999999999999999999") == quantity("99999999999999999998")', False),
    ('quantity("1") == quantity("1000m")', True),
    ('quantity("9999999999999999999999999999999999999G").asApproximateFloat()', 1.0000000000000001e46),
    ('quantity("0.0000000001").compareTo(quantity("1n"))', 0), ('sign(quantity("-1e-30"))', -1),
    # Kubernetes' approximate float: the unscaled number times a power of ten
    ('quantity("0.3").asApproximateFloat()', 0.30000000000000004), ('quantity("200m").asApproximateFloat()', 0.2),
    ('quantity("123456789.123456789").asApproximateFloat()', 123456789.12345679),
    # add and sub keep Kubernetes' form
    ('quantity("500m").add(quantity("500m")).isInteger()', False),
    ('quantity("1").add(quantity("1000m")).isInteger()', False), ('quantity("1k").add(quantity("1")).asInteger()', 1001),
    ('quantity("0").add(quantity("1000m")).isInteger()', False),
    ('quantity("4611686018427387904").add(quantity("4611686018427387904")).isInteger()', False),
    ('quantity("0.7").sub(quantity("0.1")).asApproximateFloat()', 0.6000000000000001),
    ('quantity("0.7").add(-1).asApproximateFloat()', -0.30000000000000004), ('quantity("1k").sub(1).asInteger()', 999),
    ('quantity("1Ki").add(quantity("1.5")).asApproximateFloat()', 1025.5),
])
def test_quantity_answers_as_kubernetes(source, expected):
    if expected is ERROR:
        with pytest.raises(Exception):
            _run(source)
        return
    value = _run(source)
    assert value == expected and type(value) is type(expected), value


def test_a_quantity_its_double_describes_stays_a_plain_float():
    """The common forms cost nothing new: a float, as before, and the same float every time (cached)."""
    for text in ("4Gi", "500m", "2", "1.5", "100Mi", "250m"):
        value = _run(f'quantity("{text}")')
        assert type(value) is float, text
    assert type(_run('quantity("1000m")')) is Quantity and _run('quantity("1000m")') == 1.0


@pytest.mark.parametrize("text", ["1" * 201, "1e401", "1e-401"])
def test_aiadmits_bounds_on_a_quantity_string(text):
    with pytest.raises(Exception, match="aiadmit's bound"):
        _run(f'quantity("{text}")')


def test_a_quantity_of_a_number_is_read_by_value_as_the_api_server_stores_it():
    assert _run("quantity(1).isInteger()") is True and _run("quantity(1.0).asInteger()") == 1
    assert _run("quantity(0.5).asApproximateFloat()") == 0.5 and _run("quantity(0.5).isInteger()") is False
