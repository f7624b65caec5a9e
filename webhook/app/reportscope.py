"""What a change of the policy set affects: which kinds, in which namespaces, the reports controller reads again.

Objects are not kept (only their results are: app/reportstore.py), so every object a new engine may judge
differently must be read again, and every object it cannot judge differently must not be: at 100,000 pods a
cluster-wide read of the pods is 200 list pages. The two engines are compared:

- a policy that is not the same compiled object in both (added, removed, a new generation that loaded): every
  audited kind it admits (`match.kinds` / `excludeKinds`, old and new), in every namespace. A Policy object whose
  new generation does not load keeps its previous one (app/clusterobjects.py), the same object: nothing;
- an exception in one engine and not the other (added, removed, changed): the namespaces it covers (its own, for a
  PolicyException object; a config-file exception's globs mean every namespace), and there only the audited kinds
  that both its `match.kinds` and one of the policies it lifts admit. One that does not load is in neither: nothing;
- anything else of the config (classification, actions, params ...): everything.

The answer is a set of (namespace, kind id) pairs, namespace None for every namespace.
"""

from __future__ import annotations

from typing import Optional

from webhook.language.config import Config
from webhook.model.valueclass import replace

EVERYWHERE = None


def _config_rest(engine) -> object:
    return replace(engine.config, exceptions=(), source=None) if isinstance(engine.config, Config) else engine.config


def _admitting(policies, audited: dict[str, str]) -> set[str]:
    return {kid for kid, name in audited.items() for p in policies if p is not None and p.match.admits_kind(name)}


def affected(old, new, audited: dict[str, str]) -> set[tuple[Optional[str], str]]:
    """(namespace or None, kind id) to read again when `new` replaces `old`; `audited`: kind id -> kind name."""
    try:
        same_config = _config_rest(old) == _config_rest(new)
    except TypeError:  # a field without a sound equality: assume it changed
        same_config = False
    if not same_config or old.intree is not new.intree and (old.intree or new.intree):
        return {(EVERYWHERE, kid) for kid in audited}
    out: set[tuple[Optional[str], str]] = set()
    for pid in set(old.by_id) | set(new.by_id):
        before, after = old.by_id.get(pid), new.by_id.get(pid)
        if before is not after:
            out |= {(EVERYWHERE, kid) for kid in _admitting((before, after), audited)}
    for exception in set(old.config.exceptions) ^ set(new.config.exceptions):
        lifted = [engine.by_id.get(pid) for engine in (old, new) for pid in exception.policies]
        if "*" in exception.policies:
            lifted = list(old.by_id.values()) + list(new.by_id.values())
        kinds = {kid for kid in _admitting(lifted, audited)
                 if not exception.kinds or audited[kid] in exception.kinds}
        namespaces = ([EVERYWHERE] if any(set(ns) & set("*?[") for ns in exception.namespaces)
                      else list(exception.namespaces))
        out |= {(namespace, kid) for namespace in namespaces for kid in kinds}
    return out


def plan(wanted: set[tuple[Optional[str], Optional[str]]], kinds: set[str]) -> list[tuple[Optional[str], list[str]]]:
    """The reads that cover `wanted` ((namespace or None, kind id or None: every kind)): every namespace's first,
    then each namespace's kinds that no cluster-wide read covers; each a (namespace, sorted kinds) pair."""
    expanded = {(ns, kid) for ns, kind in wanted for kid in ([kind] if kind else kinds) if kid in kinds}
    everywhere = sorted(kid for ns, kid in expanded if ns is EVERYWHERE)
    reads = [(EVERYWHERE, everywhere)] if everywhere else []
    by_namespace: dict[str, set[str]] = {}
    for ns, kid in expanded:
        if ns is not EVERYWHERE and kid not in everywhere:
            by_namespace.setdefault(ns, set()).add(kid)
    return reads + [(ns, sorted(by_namespace[ns])) for ns in sorted(by_namespace)]
