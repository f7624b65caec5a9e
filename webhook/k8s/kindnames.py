"""Which kinds exist, from the kinds table: a kind the input misspells is an input error, not a silent pass.

`kinds.yaml` lists the pod-bearing kinds (`kinds`) and, by API group, the kinds known
to hold no pods (`otherKinds`). A group marked `closed` (Kubernetes' own: core, apps,
batch, ...) has no other kinds, so any other kind there is a mistake. In any group,
a kind that equals a known one but for case, or is at most two edits from one, is a
typo of it (`Deploymnet`, `pytorchjob`): the error names the kind it resembles.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from typing import Any, Optional

import yaml

KINDS_FILE = os.path.join(os.path.dirname(__file__), "kinds.yaml")
# kinds.yaml read once and written as JSON, with the digest of the text it was read from (manifests/sync.py writes
# it): reading it back costs a tenth of libyaml's load with PyYAML's constructors, 3 % of a one-file audit
# (bench/RESULTS.md, 2026-12-07). A kinds.yaml edited since is simply read as YAML.
KINDS_JSON = os.path.join(os.path.dirname(__file__), "kinds.json")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@lru_cache(maxsize=None)
def table_data(path: str = KINDS_FILE) -> dict:
    """kinds.yaml as read (libyaml: a tenth of the pure-Python loader's time); the built-in table from kinds.json
    when that was written from exactly this text."""
    with open(path, "rb") as handle:
        text = handle.read()
    if path == KINDS_FILE:
        found = _recorded(text)
        if found is not None:
            return found
    return yaml.load(text, Loader=_LOADER)


def _recorded(text: bytes) -> Optional[dict]:
    """The table kinds.json holds, if it was written from `text`; None for a missing, torn or stale file."""
    try:
        with open(KINDS_JSON, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return None
    if type(found) is not dict or found.get("sha256") != hashlib.sha256(text).hexdigest():
        return None
    table = found.get("table")
    return table if type(table) is dict else None


def recorded_text(path: str = KINDS_FILE) -> str:
    """What kinds.json must hold for the table in `path` (manifests/sync.py writes it; tests/test_kindnames.py)."""
    with open(path, "rb") as handle:
        text = handle.read()
    table: Any = yaml.load(text, Loader=_LOADER)
    return json.dumps({"sha256": hashlib.sha256(text).hexdigest(), "table": table}, indent=1) + "\n"


@lru_cache(maxsize=None)
def _groups(path: str = KINDS_FILE) -> dict[str, tuple[bool, frozenset, frozenset]]:
    """group -> (closed, pod-bearing kinds, other kinds)."""
    data = table_data(path)
    pods: dict[str, set] = {}
    for entry in data["kinds"]:
        pods.setdefault(entry.get("group", ""), set()).add(entry["kind"])
    other = data.get("otherKinds") or {}
    out = {}
    for group in set(pods) | set(other):
        spec = other.get(group) or {}
        out[group] = (bool(spec.get("closed")), frozenset(pods.get(group, ())), frozenset(spec.get("kinds") or ()))
    return out


@lru_cache(maxsize=None)
def known_kinds(path: str = KINDS_FILE) -> frozenset:
    """Every kind the table names, in any group: what a policy's `match.kinds` may say without
    `unknownKinds: allow`."""
    return frozenset().union(*(pods | other for _, pods, other in _groups(path).values()))


def holds_no_pods(group: str, kind: str) -> bool:
    """Whether the table knows this kind as one without pod templates (not searched by shape)."""
    found = _groups().get(group)
    return found is not None and kind in found[2]


def _within_two_edits(a: str, b: str) -> bool:
    """Levenshtein distance (adjacent transposition counted as one edit) of at most 2."""
    if abs(len(a) - len(b)) > 2:
        return False
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                row[j] = min(row[j], previous2[j - 2] + 1)
        previous2, previous = previous, row
    return previous[-1] <= 2


def kind_problem(group: str, kind: str) -> Optional[str]:
    """Why `kind` in `group` cannot be right, or None (known, or unknown in a group that may have other kinds)."""
    found = _groups().get(group)
    if found is None:
        return None
    closed, pods, other = found
    known = pods | other
    if kind in known or (group == "" and kind.endswith("List") and kind[:-4] in known):
        return None
    where = f"API group {group}" if group else "the core API (apiVersion: v1)"
    for candidate in sorted(known):
        if candidate.lower() == kind.lower() or (len(candidate) >= 6 and _within_two_edits(kind, candidate)):
            return f"kind {kind!r} is not a kind of {where}: did you mean {candidate!r}?"
    if closed:
        return f"kind {kind!r} is not a kind of {where}"
    return None
