"""Waiting for CustomResourceDefinitions to be Established, for every e2e module (the control plane's kubectl and
the single-node cluster's alike).

`kubectl wait --for=condition=Established crd/NAME` does not wait on a CRD the API server has not yet given any
condition: it exits 1 at once with "error: .status.conditions accessor error: <nil> is of the type <nil>, expected
[]interface{}". Right after an apply, under load, that window is real: tests/e2e/test_openreports_e2e.py failed so
in one of three runs on 2026-12-07 (load average 7 on 2 cores). The session's `crds` fixture (conftest.py) already
polled for itself; this is the same poll for the modules that install their own CRDs. Bounded: it fails with the
CRDs still pending and what their status said last.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable


def _established(crd: dict) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def wait_established(kubectl: Callable[..., Any], *names: str, timeout: float = 60.0) -> None:
    """Poll `kubectl get crd NAME... -o json` until every named CRD (`crd/` prefix optional) has the condition
    Established=True. `kubectl` is any of the e2e wrappers: called with kubectl's arguments and `check=False`, it
    returns a CompletedProcess."""
    pending = [name.removeprefix("crd/") for name in names]
    deadline = time.monotonic() + timeout
    said = ""
    while True:
        done = kubectl("get", "crd", *pending, "-o", "json", check=False)
        if done.returncode == 0:
            found = json.loads(done.stdout)
            items = found.get("items", []) if found.get("kind") == "List" else [found]
            ready = {item["metadata"]["name"] for item in items if _established(item)}
            pending = [name for name in pending if name not in ready]
            said = json.dumps({i["metadata"]["name"]: (i.get("status") or {}).get("conditions") for i in items
                               if i["metadata"]["name"] in pending})[:2000]
            if not pending:
                return
        else:
            said = (done.stderr or "").strip()[:2000]
        if time.monotonic() > deadline:
            raise AssertionError(f"CRDs not Established after {timeout:.0f} s: {pending}; last seen: {said}")
        time.sleep(0.25)
