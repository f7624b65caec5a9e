"""JSON Schema (2020-12) rules, with Kubernetes quantity keywords.

``quantityMinimum: "4Gi"`` on a field compares the field's quantity with the
bound exactly, so floors and ceilings on resources are data, not code:

    schema:
      properties:
        resources:
          properties:
            limits:
              properties:
                memory: {quantityMinimum: 4Gi}
"""

from __future__ import annotations

from typing import Any, Iterator

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError

from webhook.model.quantity import QuantityError, parse_quantity


def _bound(keyword: str, test, words: str):
    def check(validator, bound, instance, schema) -> Iterator[ValidationError]:
        if not (isinstance(instance, (str, int, float)) and not isinstance(instance, bool)):
            return
        try:
            value, limit = parse_quantity(instance), parse_quantity(bound)
        except QuantityError:
            yield ValidationError(f"{instance!r} is not a Kubernetes quantity")
            return
        if not test(value, limit):
            yield ValidationError(f"{instance} is {words} {bound}")
    check.__name__ = keyword
    return check


def _is_quantity(validator, wanted, instance, schema) -> Iterator[ValidationError]:
    if not wanted:
        return
    try:
        parse_quantity(instance)
    except QuantityError:
        yield ValidationError(f"{instance!r} is not a Kubernetes quantity")


QUANTITY_KEYWORDS = {
    "quantityMinimum": _bound("quantityMinimum", lambda v, b: v >= b, "less than"),
    "quantityMaximum": _bound("quantityMaximum", lambda v, b: v <= b, "more than"),
    "quantityExclusiveMinimum": _bound("quantityExclusiveMinimum", lambda v, b: v > b, "not more than"),
    "quantityExclusiveMaximum": _bound("quantityExclusiveMaximum", lambda v, b: v < b, "not less than"),
    "quantity": _is_quantity,
}

KubernetesValidator = validators.extend(Draft202012Validator, QUANTITY_KEYWORDS)


class SchemaRule:
    """A compiled JSON Schema: `errors(instance)` yields (relative pointer tokens, message)."""

    def __init__(self, schema: dict):
        try:
            KubernetesValidator.check_schema(schema)
            for keyword in ("quantityMinimum", "quantityMaximum", "quantityExclusiveMinimum",
                            "quantityExclusiveMaximum"):
                for bound in _find_keyword(schema, keyword):
                    parse_quantity(bound)
        except SchemaError as exc:
            raise ValueError(f"invalid JSON Schema: {exc.message}") from None
        except QuantityError as exc:
            raise ValueError(f"invalid quantity bound: {exc}") from None
        self.validator = KubernetesValidator(schema)

    def errors(self, instance: Any) -> Iterator[tuple[list, str]]:
        for error in self.validator.iter_errors(instance):
            yield list(error.absolute_path), error.message


def _find_keyword(schema: Any, keyword: str) -> Iterator[Any]:
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == keyword:
                yield value
            else:
                yield from _find_keyword(value, keyword)
    elif isinstance(schema, list):
        for item in schema:
            yield from _find_keyword(item, keyword)
