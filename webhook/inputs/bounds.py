"""The cost bound of one review: an absurd shape is refused before it costs the worker its time or memory.

Why: a worker evaluates one review at a time (the engine is CPU-bound Python), so a review that takes a second
delays every review queued behind it on that worker, and the API server fails closed after `timeoutSeconds`.
The time budget alone does not help: four clients looping a 1.5 MB review of 20,000 tiny GPU containers each
spend the whole budget, and legitimate reviews waited 7-14 s. The engine's cost grows with the number of
containers (about 0.1 ms each, every policy visits each one) and, far more slowly, with the number of JSON values
(measured in docs/reliability.md); decoding costs memory in proportion to the values (two million empty lists in
5.9 MB decode to 129 MiB). So two bounds, both far above any real object, checked where they are cheap:

- `MAX_NODES` JSON nodes (values, and the keys of maps) in the request body, counted on the bytes *before*
  decoding: outside strings, a non-empty list of n items has `[` and n-1 commas, a non-empty map of n members `{`,
  n colons and n-1 commas, so 1 + the count of `[{,:` is the number of nodes plus one per empty list or map (an
  upper bound, exact otherwise). bytes.count runs in C at gigabytes per second; only when that raw count (which
  includes those inside strings) is over the bound are the separators outside strings counted exactly (bytes
  operations in C, a few milliseconds per MB; `count_nodes`). A real Pod review (object, oldObject and their
  managedFields) has a few thousand nodes.
- `MAX_CONTAINERS` containers (`containers`, `initContainers`, `ephemeralContainers`, in any pod template) per
  object (`object`, `oldObject`), counted on the decoded request before the engine runs. A container is a map, so
  when the body holds no more `{` than the bound there is nothing to walk; otherwise one walk over the (bounded)
  values finds them.

A refused review is answered as a review (HTTP 200, `allowed: false`, code 413, the bound named) when its uid can
be read from the head of the body, as the API server writes it; otherwise 413. aiadmit's own extension: Kubernetes
sets no such limits (docs/webhook.md, "Review bounds").
"""

from __future__ import annotations

import re
from typing import Any, Optional

MAX_NODES = 200_000
MAX_CONTAINERS = 500
CONTAINER_KEYS = ("containers", "initContainers", "ephemeralContainers")

_MARKS = b'"[{,:'
_NOT_MARKS = bytes(b for b in range(256) if b not in _MARKS)
# The API server writes AdmissionReview{kind, apiVersion, request{uid, ...}}: the uid is in the first few hundred
# bytes. Only a plain uid (what the API server sends: a UUID) is echoed.
_HEAD_UID = re.compile(rb'"request"\s*:\s*\{\s*"uid"\s*:\s*"([A-Za-z0-9._:-]{1,128})"')
_HEAD = 1024


def _separators(data: bytes) -> int:
    return data.count(b"[") + data.count(b"{") + data.count(b",") + data.count(b":")


def count_nodes(body: bytes, limit: int = MAX_NODES) -> int:
    """The JSON nodes of `body` (+1 per empty list or map) when over `limit`; at most that otherwise (module doc)."""
    if len(body) < limit:  # every node but the first costs a separator byte: nothing to count
        return len(body)
    rough = 1 + _separators(body)
    if rough <= limit:
        return rough
    # Exact, in C: escaped backslashes, then escaped quotes, taken out (left to right, as JSON pairs them), so every
    # quote left opens or closes a string; everything but quotes and separators deleted; strings that held no
    # separator (`""` now: two strings are never adjacent in JSON) deleted. What is left outside quotes counts.
    plain = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = plain.translate(None, _NOT_MARKS).replace(b'""', b"")
    return 1 + sum(map(len, marks.split(b'"')[::2]))


def body_problem(body: bytes, max_nodes: int = MAX_NODES) -> Optional[str]:
    """Why this body is refused before decoding, or None."""
    nodes = count_nodes(body, max_nodes)
    if nodes > max_nodes:
        return (f"the review holds {nodes:,} JSON values and keys, over aiadmit's bound of {max_nodes:,} per "
                f"review (real objects hold a few thousand): refused unread")
    return None


def head_uid(body: bytes) -> Optional[str]:
    """The request's uid as the API server writes it at the head of the body, or None."""
    found = _HEAD_UID.search(body, 0, _HEAD)
    return found.group(1).decode("ascii") if found else None


def count_containers(obj: Any, limit: int) -> int:
    """Containers in every list named like a pod spec's container lists, anywhere in `obj`; stops past `limit`.

    Not walked: `metadata` (labels, annotations and managedFields, most of a real review's nodes, hold no pod
    spec) and the containers themselves (a container holds no containers the engine would visit)."""
    count = 0
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in CONTAINER_KEYS and isinstance(item, list):
                    count += len(item)
                    if count > limit:
                        return count
                elif key != "metadata" and isinstance(item, (dict, list)):
                    stack.append(item)
        elif isinstance(value, list):
            stack.extend(item for item in value if isinstance(item, (dict, list)))
    return count


def shape_problem(request: dict, body: bytes, max_containers: int = MAX_CONTAINERS) -> Optional[str]:
    """Why this decoded request is refused before the engine, or None. `body` is what it was decoded from."""
    if body.count(b"{") <= max_containers:  # every container is a map: too few maps to hold too many
        return None
    for key in ("object", "oldObject"):
        count = count_containers(request.get(key), max_containers)
        if count > max_containers:
            return (f"request.{key} has more than {max_containers:,} containers, over aiadmit's bound per object "
                    f"(real pods have a few dozen at most): refused unchecked")
    return None
