"""What the reports controller remembers: per object, its report results; per namespace, what was written.

No object is kept: an object's evaluation is reduced at once to its report
results (the PolicyReport writer's compact JSON, `policyreport.fragment`) and
only those stay, keyed by (kind, namespace, name), with the object's uid. A
namespace whose results changed is marked dirty with the time of its oldest
unwritten change (the lag metric's start); `take_dirty` hands the writer what
to write. An object whose results did not change (a status update, a pod
owned by a listed controller) marks nothing.

Results are stored as one UTF-8 bytes string per object (each result's status
and JSON on its own line): about a third of the memory of a tuple of str pairs.
"""

from __future__ import annotations

import threading
import time
from typing import Optional

Key = tuple  # (kind, namespace or "", name)


def encode(results: list[tuple[str, str]]) -> bytes:
    return "\n".join(f"{status}\t{text}" for status, text in results).encode()


def decode(blob: bytes) -> list[tuple[str, str]]:
    if not blob:
        return []
    return [tuple(line.split("\t", 1)) for line in blob.decode().split("\n")]  # type: ignore[misc]


class ReportStore:
    def __init__(self):
        self.lock = threading.Lock()
        self.objects: dict[Key, tuple[str, Optional[str], bytes, bytes]] = {}  # key -> (uid, report ns, digest, blob)
        self.by_namespace: dict[Optional[str], set[Key]] = {}
        self.dirty: dict[Optional[str], float] = {}  # report namespace -> time.time() of its oldest unwritten change
        self.changed = threading.Condition(self.lock)

    def put(self, key: Key, uid: str, namespace: Optional[str], digest: bytes, blob: bytes,
            when: Optional[float] = None) -> bool:
        """Store an object's results; True when its report must change (new, moved, or different results)."""
        with self.lock:
            old = self.objects.get(key)
            if old is not None and old[1] == namespace and old[2] == digest and old[0] == uid:
                return False
            if old is not None and old[1] != namespace:
                self._forget(key, old[1], when)
            self.objects[key] = (uid, namespace, digest, blob)
            self.by_namespace.setdefault(namespace, set()).add(key)
            self._mark(namespace, when)
            return True

    def delete(self, key: Key, when: Optional[float] = None) -> bool:
        with self.lock:
            old = self.objects.pop(key, None)
            if old is None:
                return False
            self._forget(key, old[1], when)
            return True

    def keys_of(self, kind: str) -> dict[Key, str]:
        with self.lock:
            return {key: value[0] for key, value in self.objects.items() if key[0] == kind}

    def _forget(self, key: Key, namespace: Optional[str], when: Optional[float]) -> None:
        members = self.by_namespace.get(namespace)
        if members is not None:
            members.discard(key)
            if not members:
                del self.by_namespace[namespace]
        self._mark(namespace, when)

    def _mark(self, namespace: Optional[str], when: Optional[float]) -> None:
        if namespace not in self.dirty:
            self.dirty[namespace] = time.time() if when is None else when
        self.changed.notify_all()

    def take_dirty(self) -> dict[Optional[str], tuple[float, list[tuple[str, str]]]]:
        """Every dirty namespace with its oldest change and its results (in key order), now marked clean."""
        with self.lock:
            dirty, self.dirty = self.dirty, {}
            out = {}
            for namespace, since in dirty.items():
                results: list[tuple[str, str]] = []
                for key in sorted(self.by_namespace.get(namespace, ()), key=lambda k: (k[0], k[1], k[2])):
                    results += decode(self.objects[key][3])
                out[namespace] = (since, results)
            return out

    def requeue(self, namespace: Optional[str], since: float) -> None:
        with self.lock:
            self.dirty[namespace] = min(since, self.dirty.get(namespace, since))
            self.changed.notify_all()

    def wait_dirty(self, timeout: float) -> bool:
        with self.lock:
            if not self.dirty:
                self.changed.wait(timeout)
            return bool(self.dirty)

    def counts(self) -> tuple[int, int]:
        with self.lock:
            return len(self.objects), len(self.dirty)
