"""Kubernetes resource quantities ("500m", "64Gi", "1e3") parsed exactly.

Kubernetes accepts a signed decimal number followed by one suffix: a binary SI
suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal SI suffix (n, u, m, k, M, G, T, P, E)
or a decimal exponent (e3, E-2). Values are kept as ``Fraction`` so that
"0.1" + "0.2" compares equal to "300m" and floors such as "4Gi" are exact.

`fractions` (with `decimal` and `numbers`, which it imports: ~9 M instructions, ~2 % of a warm one-file audit) is
imported by the first parse, not with this module: most resource counts are written as plain integers ("1", 8),
and `plain_count` answers those without it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Optional

from webhook.model.lazyre import Lazy

if TYPE_CHECKING:
    from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # powers of ten
_QUANTITY = Lazy(  # compiled by the first parse: a plain count needs none (`plain_count`)
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


# Kubernetes: "no quantity may represent a number greater than 2^63-1 in magnitude" (resource.Quantity). It caps
# larger ones; aiadmit refuses them instead (an extension: a limit nobody can mean is reported, not guessed at), and
# so never builds a number whose arithmetic or float conversion could blow up.
MAX_MAGNITUDE = 2 ** 63 - 1
_MAX_DIGITS = 64  # of the number part: 2^63 has 19 digits, plus decimals; more is not a quantity anyone writes


class QuantityError(ValueError):
    """A string that Kubernetes would not accept as a resource quantity."""


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:30]) + f"... ({len(text)} characters)"


def _bounded(value: Fraction, text: str) -> Fraction:
    if abs(value) > MAX_MAGNITUDE:
        raise QuantityError(f"{_shown(text)} is out of range: Kubernetes quantities stay within 2^63-1")
    return value


@lru_cache(maxsize=None)
def fraction() -> type:
    """`fractions.Fraction`, imported by the first call (an import statement in a function runs on every call)."""
    from fractions import Fraction

    return Fraction


@lru_cache(maxsize=4096)
def _parse_string(text: str) -> Fraction:
    Fraction = fraction()  # noqa: N806 - the class, under its own name
    match = _QUANTITY.match(text) if len(text) <= _MAX_DIGITS + 8 else None
    if match is None:
        if len(text) > _MAX_DIGITS + 8 and _QUANTITY.match(text[:_MAX_DIGITS]):
            raise QuantityError(f"{_shown(text)} is out of range: too many digits for a Kubernetes quantity")
        raise QuantityError(f"{_shown(text)} is not a Kubernetes quantity")
    number = Fraction(match.group("number"))
    if match.group("exp"):
        exponent = int(match.group("exp")[1:])
        if abs(exponent) > 100:
            raise QuantityError(f"{_shown(text)}: exponent out of range")
        return _bounded(number * Fraction(10) ** exponent, text)
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        return _bounded(number * _BINARY[suffix], text)
    exponent = _DECIMAL[suffix]
    return _bounded(number * 10 ** exponent if exponent >= 0 else number / 10 ** -exponent, text)


def parse_quantity(value: object) -> Fraction:
    """Return the exact value of a quantity given as a string or a number.

    YAML turns ``cpu: 2`` and ``cpu: 0.5`` into numbers, and Kubernetes accepts
    them, so numbers are quantities too; booleans and anything else are not.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a Kubernetes quantity")
    if isinstance(value, int):
        if abs(value) > MAX_MAGNITUDE:  # compared, never printed: a 6,000-digit int has no str() in Python 3.11
            raise QuantityError("an integer out of range: Kubernetes quantities stay within 2^63-1")
        return fraction()(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):  # YAML .nan, .inf, or 1e400 overflowed
            raise QuantityError(f"{value!r} is not a Kubernetes quantity (not a finite number)")
        return _bounded(fraction()(str(value)), str(value))
    if isinstance(value, str):
        return _parse_string(value.strip())
    raise QuantityError(f"{value!r} is not a Kubernetes quantity")


def plain_count(value: object) -> Optional[int]:
    """The value of a quantity written as a plain count, an int or a string of at most 18 ASCII digits (below
    10^18, so within 2^63-1: a quantity by Kubernetes' grammar, and its value exactly), else None; None says
    nothing of `value`, which `parse_quantity` then decides (spaces, signs, suffixes, decimals, bounds)."""
    if type(value) is int:
        return value if abs(value) <= MAX_MAGNITUDE else None
    if type(value) is str and len(value) <= 18 and value.isdigit() and value.isascii():
        return int(value)
    return None


def is_quantity(value: object) -> bool:
    try:
        parse_quantity(value)
    except QuantityError:
        return False
    return True


def format_bytes(value: Fraction | int) -> str:
    """Render a byte count the way people write memory: the largest exact binary suffix."""
    value = int(value)
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if value >= unit and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)
