"""The cost limits a CEL expression is loaded under (cel/cost.py estimates against them; the config sets them).

A module of its own because the config and every policy loader name the limits, and a run whose bundle is kept
whole (language/bundlecache.py) reads the config but estimates nothing: it imports this, not the estimator and the
checker behind it.
"""

from __future__ import annotations

from webhook.model.valueclass import Compared, Frozen


class Limits(Frozen, Compared):
    """`max_object_bytes`: the size of the largest object (the API server's request limit);
    `per_expression`: the estimated cost above which an expression does not load.

    The default limit admits what is linear or quadratic in the object (two independent lists nested) and rejects
    what is cubic (three nested comprehensions over the same list); Kubernetes' own limit for a CRD rule is 10^7
    with list bounds from the schema's maxItems, which Kubernetes objects rarely declare."""

    max_object_bytes: int = 3 * 1024 * 1024
    per_expression: float = 1e13
    min_item_bytes: int = 16
    max_value_factor: float = 64.0  # no string or list built may be estimated larger than this many objects

    def __init__(self, max_object_bytes: int = 3 * 1024 * 1024, per_expression: float = 1e13, min_item_bytes: int = 16,
                 max_value_factor: float = 64.0) -> None:
        object.__setattr__(self, "max_object_bytes", max_object_bytes)
        object.__setattr__(self, "per_expression", per_expression)
        object.__setattr__(self, "min_item_bytes", min_item_bytes)
        object.__setattr__(self, "max_value_factor", max_value_factor)

    def _compared(self) -> tuple:
        """The fields `==` compares and the hash digests."""
        return (self.max_object_bytes, self.per_expression, self.min_item_bytes, self.max_value_factor)
