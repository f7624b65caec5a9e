"""Kubernetes label selectors: matchLabels and matchExpressions, as the API server reads them."""

from __future__ import annotations


def selector_matches(selector: dict, labels: dict) -> bool:
    """Kubernetes label selector semantics (matchLabels and matchExpressions are ANDed)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or ()
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True
