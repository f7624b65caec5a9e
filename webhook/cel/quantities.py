"""Kubernetes' quantity() in CEL, exactly: the form k8s.io/apimachinery's ParseQuantity keeps, and what it implies.

Why: aiadmit carries a CEL quantity as a double, its value in base units. Kubernetes keeps more, and its answers
show it: a quantity parsed into an int64 at a non-negative decimal scale is an integer (`isInteger()`, `asInteger()`),
one at a negative scale ("1000m", "1.0", "0.0") or in the arbitrary-precision form ("1Pi", "1.5Gi", 19 digits) is
not, whatever its value; `compareTo()` is exact beyond a double's 53 bits; a number-less "Gi" is 0; decimal values
beyond int64 are kept (binary-SI ones capped at 2^63-1), `asApproximateFloat()` is the unscaled number times a power
of ten (0.30000000000000004 for "0.3"). So quantity() gives a plain float when that float tells all Kubernetes
would answer (the common case: "4Gi", "500m", "2"), and otherwise a `Quantity`: a float (the approximate value)
that carries the exact value and Kubernetes' form. Sums and differences follow Kubernetes' Add and Sub.

A form is (decimal, unscaled, exponent): the value unscaled * 10**exponent, `decimal` for the arbitrary-precision
form (inf.Dec) as opposed to the int64 one (int64Amount).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional

from webhook.model.quantity import fraction as _fraction  # fractions.Fraction, imported by the first use

if TYPE_CHECKING:
    from fractions import Fraction  # imported where used: most runs compute no exact value (model/quantity.py)

INT64_MAX, INT64_MIN = 2 ** 63 - 1, -2 ** 63
_DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARACTERS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
# aiadmit's bounds (Kubernetes has none): no quantity's exact value is built of more digits than these allow
MAX_LENGTH, MAX_EXPONENT = 200, 400
_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


class QuantityError(ValueError):
    """What Kubernetes' ParseQuantity says of a string it refuses."""


class Quantity(float):
    """A quantity the double alone does not describe: the double is its approximate value (asApproximateFloat)."""

    __slots__ = ("exact", "form", "integer")

    def __eq__(self, other: Any) -> bool:  # Kubernetes compares quantities exactly
        if type(other) is Quantity or (type(other) is float and math.isfinite(other)):
            return self.exact == exact(other)
        return float.__eq__(self, other)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    __hash__ = float.__hash__


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """Kubernetes' parseQuantityString: (positive, the number as written, digits before the point without leading
    zeros, digits after it, suffix)."""
    end, position, positive = len(text), 0, True
    if end and text[0] in "+-":
        positive, position = text[0] == "+", 1
    while position < end and text[position] == "0":
        position += 1
    if position == end:
        return positive, "0", "0", "", ""
    start = position
    while position < end and text[position] in _DIGITS:
        position += 1
    number = text[start:position] or "0"
    fraction = ""
    if position < end and text[position] == ".":
        position += 1
        start = position
        while position < end and text[position] in _DIGITS:
            position += 1
        fraction = text[start:position]
    value, suffix_start = text[:position], position
    while position < end and text[position] in _SUFFIX_CHARACTERS:
        position += 1
    if position < end and text[position] in "+-":
        position += 1
    while position < end and text[position] in _DIGITS:
        position += 1
    if position < end:
        raise QuantityError(_FORMAT)
    return positive, value, number, fraction, text[suffix_start:]


def _suffix(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) of a suffix, as Kubernetes' suffixer interprets it."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:].lstrip("+-")
        if digits and set(digits) <= _DIGITS and len(suffix[1:]) - len(digits) <= 1:
            parsed = int(suffix[1:])
            if INT64_MIN <= parsed <= INT64_MAX:
                return 10, (parsed + 2 ** 31) % 2 ** 32 - 2 ** 31, "DecimalExponent"  # Go's int32(parsed)
    raise QuantityError("unable to parse quantity's suffix")


def _multiply(a: int, b: int) -> Optional[int]:
    product = a * b
    return product if INT64_MIN <= product <= INT64_MAX else None


def _scaled(value: int, scale: int) -> Optional[int]:
    """Kubernetes' positiveScaleInt64: value * 10**scale, None past int64."""
    product = value * 10 ** scale if scale < 40 else (0 if value == 0 else INT64_MAX + 1)
    return product if INT64_MIN <= product <= INT64_MAX else None


def parse(text: str) -> tuple[bool, int, int]:
    """Kubernetes' ParseQuantity: the form it keeps (module docstring); QuantityError with its message."""
    if not text:
        raise QuantityError(_FORMAT)
    if len(text) > MAX_LENGTH:
        raise QuantityError(f"longer than {MAX_LENGTH} characters (aiadmit's bound)")
    if text == "0":
        return False, 0, 0
    positive, value, number, fraction, suffix = _split(text)
    base, exponent, kind = _suffix(suffix)
    if abs(exponent) > MAX_EXPONENT:
        raise QuantityError(f"an exponent beyond {MAX_EXPONENT} (aiadmit's bound)")
    scale, mantissa = 0, 1
    if kind == "BinarySI":
        if exponent >= 0 and not fraction:
            mantissa = 1 << exponent
            precision = 15 - len(number) - int(exponent * 3 / 10) - 1
        else:
            precision = -1
    else:
        scale, precision = exponent, 18 - (len(number) + len(fraction))
    if precision >= 0:
        scale -= len(fraction)
        if scale >= -9:
            result = _multiply(int(number + fraction), mantissa)
            if result is not None:
                return False, result if positive else -result, scale
    return _decimal(value, base, exponent, kind)


def _decimal(value: str, base: int, exponent: int, kind: str) -> tuple[bool, int, int]:
    """The arbitrary-precision path of ParseQuantity: rounded up to a nano, binary-SI capped at 2^63-1."""
    body = value.lstrip("+-")
    whole, _, decimals = body.partition(".")
    if not body or not (whole + decimals) or not set(whole + decimals) <= _DIGITS or value.count("-") > 1:
        raise QuantityError("unable to parse numeric part of quantity")
    negative = value.startswith("-")
    unscaled, exp = int(whole + decimals), -len(decimals)
    if base == 10:
        exp += exponent
    else:
        unscaled <<= exponent
    if unscaled != 0:  # to nano scale, rounding any finer part up (away from zero)
        if exp < -9:
            unscaled, exp = -(-unscaled // 10 ** (-9 - exp)), -9
        else:
            unscaled, exp = unscaled * 10 ** (exp + 9), -9
    if kind == "BinarySI" and _fraction()(unscaled) * _fraction()(10) ** exp > INT64_MAX:
        unscaled, exp = INT64_MAX * 10 ** 9, -9
    return True, -unscaled if negative else unscaled, exp


def _pow10(n: int) -> float:
    """Go's math.Pow10, table for table (its products and quotients round as Go's do)."""
    if 0 <= n <= 308:
        return float(f"1e{32 * (n // 32)}") * float(f"1e{n % 32}")
    if -323 <= n < 0:
        return float(f"1e-{32 * (-n // 32)}") / float(f"1e{-n % 32}")
    return 0.0 if n < 0 else float("inf")


def approximate(form: tuple[bool, int, int]) -> float:
    """Kubernetes' AsApproximateFloat64."""
    _, unscaled, exp = form
    return float(unscaled) if exp == 0 else float(unscaled) * _pow10(exp)


def as_int64(form: tuple[bool, int, int]) -> Optional[int]:
    """Kubernetes' AsInt64: only the int64 form at a non-negative scale, within int64."""
    decimal, unscaled, exp = form
    if decimal or exp < 0:
        return None
    return _scaled(unscaled, exp)


def carry(form: tuple[bool, int, int]) -> float:
    """The value aiadmit carries for a quantity of this form: a plain float when it tells all (module docstring)."""
    if not form[0] and form[2] == 0 and -2 ** 53 <= form[1] <= 2 ** 53:  # an int64 form at scale 0: its float says all
        return float(form[1])
    near, integer = approximate(form), as_int64(form)
    fraction = _fraction()
    value = fraction(form[1]) * fraction(10) ** form[2]
    if math.isfinite(near) and (integer is not None) == (near.is_integer() and INT64_MIN <= near < 2 ** 63) and fraction(repr(near)) == value:
        return near
    found = Quantity(near)
    found.exact, found.form, found.integer = value, form, integer
    return found


def form_of(q: Any) -> tuple[bool, int, int]:
    """The form of a carried quantity; a plain float's is what its shortest decimal spelling parses to."""
    if type(q) is Quantity:
        return q.form
    if type(q) is int:  # add(int)/sub(int): Kubernetes' NewQuantity(int, DecimalSI)
        return False, q, 0
    if q.is_integer() and -2 ** 53 <= q <= 2 ** 53:
        return False, int(q), 0
    digits = _fraction()(repr(q))  # 1e30 is 10**30 as written, not the binary double's 1000000000000000019884624838656
    exp = 0
    while digits.denominator != 1:
        digits, exp = digits * 10, exp - 1
    while digits and digits.numerator % 10 == 0:
        digits, exp = digits / 10, exp + 1
    return False, int(digits), exp


def exact(q: Any) -> Fraction:
    return q.exact if type(q) is Quantity else _fraction()(repr(q) if type(q) is float else q)


def add(a: Any, b: Any, negate: bool = False) -> float:
    """Kubernetes' Quantity.Add (Sub with `negate`): in int64 when both are and nothing overflows, else decimal."""
    x, y = form_of(a), form_of(b)
    if negate:
        y = (y[0], -y[1], y[2])
    if not x[0] and not y[0]:
        if y[1] == 0:
            return carry(x)
        if x[1] == 0:
            return carry(y)
        low, high = (x, y) if x[2] <= y[2] else (y, x)
        raised = _scaled(high[1], high[2] - low[2])
        if raised is not None and INT64_MIN <= raised + low[1] <= INT64_MAX:
            return carry((False, raised + low[1], low[2]))
    exp = min(x[2], y[2])
    return carry((True, x[1] * 10 ** (x[2] - exp) + y[1] * 10 ** (y[2] - exp), exp))
