"""The load-time portability check: CEL that the API server of a policy's `kubernetesVersion` would refuse.

Why: aiadmit runs the reference's CEL (Kubernetes 1.37), but a policy may have to stay portable to an older API
server (its `kubernetesVersion`, by default the oldest supported: webhook/k8s/versions.py), as a
ValidatingAdmissionPolicy there or in the same cluster as one. Kubernetes CEL that only some versions accept
(`<list>.includes(<value>)`, backquoted field names) then fails the load, saying which versions accept it.
aiadmit's own extensions (glob, quotaSelects, ...) are no Kubernetes CEL at any version: they load as declared
extensions, as before.

Both features are found in the expression's tokens, so no string literal can look like one: `includes` as a
method call, and a backquoted field name. Only a source with the feature's text in it is tokenized again, so the
check costs nothing for the rest.
"""

from __future__ import annotations

from typing import Iterator, Optional

from webhook.cel.lexer import ParseError, tokenize
from webhook.k8s.versions import FEATURES, CelFeature, KubernetesVersion


def uses(source: str) -> Iterator[tuple[CelFeature, int]]:
    """The version-gated features `source` uses, each with the 0-based offset of its first use."""
    if "`" not in source and "includes" not in source:
        return
    try:
        tokens = tokenize(source)
    except ParseError:  # the parser reports it, with its own message
        return
    seen = set()
    for i, (kind, value, position) in enumerate(tokens):
        if kind == "quoted":
            feature = FEATURES["backquoted"]
        elif (kind == "ident" and value == "includes" and i and tokens[i - 1][:2] == ("op", ".")
              and tokens[i + 1][:2] == ("op", "(")):
            feature = FEATURES["includes"]
        else:
            continue
        if feature.name not in seen:
            seen.add(feature.name)
            yield feature, position


def refusal(source: str, version: KubernetesVersion) -> Optional[tuple[str, int]]:
    """(why, offset) of the first feature of `source` that a `version` API server refuses in a new expression."""
    for feature, position in uses(source):
        why = feature.refusal(version)
        if why is not None:
            return f"not portable to Kubernetes {version} (kubernetesVersion): {why}", position
    return None
