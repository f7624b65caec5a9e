"""Quantities parse exactly as Kubernetes parses them."""

from fractions import Fraction

import pytest

from webhook.model.quantity import QuantityError, format_bytes, parse_quantity, plain_count


@pytest.mark.parametrize("text, value", [
    ("1e3", 1000), ("1E3", 1000), ("1e-3", Fraction(1, 1000)), ("500m", Fraction(1, 2)), ("1Gi", 2**30),
    ("1G", 10**9), ("0.5", Fraction(1, 2)), (".5", Fraction(1, 2)), ("1.5Gi", 3 * 2**29), ("100Ki", 102400),
    ("2", 2), ("+4", 4), ("-1", -1), ("1n", Fraction(1, 10**9)), ("3u", Fraction(3, 10**6)), ("1k", 1000),
    ("64Mi", 64 * 2**20), ("1Ti", 2**40), ("1Ei", 2**60), ("1E", 10**18), ("1P", 10**15), ("0", 0), ("1.", 1),
])
def test_kubernetes_forms(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("number, value", [(2, 2), (0.5, Fraction(1, 2)), (0.1, Fraction(1, 10))])
def test_yaml_numbers_are_quantities(number, value):
    assert parse_quantity(number) == value


@pytest.mark.parametrize("text", ["", "Gi", "1GB", "1gi", "1.2.3", "one", "1 Gi", "1K", "1e", "0x10", "1Mi5", "--1"])
def test_rejects_what_kubernetes_rejects(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize("value", [True, None, [], {}])
def test_rejects_non_scalars(value):
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_decimal_and_binary_differ():
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("0.1") + parse_quantity("0.2") == parse_quantity("300m")


@pytest.mark.parametrize("value, text", [(2**30, "1Gi"), (3 * 2**29, "1536Mi"), (1000, "1000"), (8 * 2**30, "8Gi")])
def test_format_bytes(value, text):
    assert format_bytes(value) == text


@pytest.mark.parametrize("value", [
    "1", "0", "007", "8", "999999999999999999", 0, 1, -3, 2 ** 63 - 1, -(2 ** 63 - 1),
    # answered by parse_quantity alone: signs, spaces, suffixes, points, 19 digits, non-ASCII digits, bools, bounds
    "+1", "-1", " 1", "1 ", "1k", "1.0", "1e3", "1000000000000000000", "9223372036854775808", "١", "²", "", True,
    False, 2 ** 63, 1.0, "x",
])
def test_a_plain_count_is_its_quantitys_exact_value_or_none(value):
    count = plain_count(value)
    if count is None:
        assert not (type(value) is str and value.isascii() and value.isdigit() and len(value) <= 18)
        return
    assert type(count) is int and count == parse_quantity(value)
