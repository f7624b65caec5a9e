"""`matchPolicy: Equivalent` (the default) of a VAP's matchConstraints and a binding's matchResources, offline.

The API server matches a request through any equivalent resource: the same resource served in another version of
its group (a CRD's versions, autoscaling/v1 and v2 HorizontalPodAutoscalers), and converts the object to the
rule's version before the policy reads it. Offline neither is known: which versions the cluster serves (a CRD's
`versions`, what a Kubernetes release still serves) and what the conversion does (a CRD's webhook, the built-in
converters). So when no rule matches the object's own version but a rule would match it in another version of the
same group and resource, the binding is not silently left out (the API server may well apply it): the caller skips
it with the reason this module gives. `matchPolicy: Exact` matches the object's own version only, as the API server
does.
"""

from __future__ import annotations

from typing import Callable, Optional

EXACT = "Exact"
POLICIES = ("Exact", "Equivalent")


def unmatched_reason(constraints: dict, rules: list, resource, rule_matches: Callable) -> Optional[str]:
    """Why an object that no rule names in its own version may still match (None: it does not)."""
    if constraints.get("matchPolicy", "Equivalent") == EXACT:
        return None
    for rule in rules:
        if not isinstance(rule, dict):
            continue
        versions = rule.get("apiVersions") or []
        if rule_matches({**rule, "apiVersions": ["*"]}, resource):
            named = ", ".join("/".join(p for p in (resource.group, v) if p) for v in versions)
            return (f"matchPolicy Equivalent: a rule names {named}, the object is {resource.api_version}: the API "
                    f"server matches it (converted to the rule's version first) if it serves both, which is not "
                    f"known offline; write the object in a version the rule names, or set matchPolicy: Exact")
    return None
