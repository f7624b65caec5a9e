"""Lease-based leader election (coordination.k8s.io/v1), so two controller replicas never both write reports.

client-go's rules, kept small: the holder renews `renewTime` every `duration / 3`;
another candidate takes the Lease only when its renewTime is older than its
`leaseDurationSeconds`, with an update carrying the resourceVersion it read (so
of two candidates one wins, the other gets a 409). A leader that cannot renew
within the duration stops (`lost` is set; the command exits non-zero and its
Deployment restarts it as a candidate): it must not write while another may.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from typing import Optional

log = logging.getLogger("aiadmit.reports")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _format(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: Optional[str]) -> Optional[datetime.datetime]:
    if not text:
        return None
    text = text.rstrip("Z")
    fmt = "%Y-%m-%dT%H:%M:%S.%f" if "." in text else "%Y-%m-%dT%H:%M:%S"
    return datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.timezone.utc)


class LeaderElector:
    def __init__(self, api, namespace: str, name: str, identity: str, duration: int = 15):
        self.api, self.namespace, self.name, self.identity, self.duration = api, namespace, name, identity, duration
        self.lost = threading.Event()
        self.stop = threading.Event()

    def _path(self, name: str = "") -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases" + (f"/{name}" if name else "")

    def _call(self, method: str, path: str, body: Optional[dict] = None):
        import json

        method, url, headers, _, _ = self.api.param_serialize(
            method, path, header_params={"Accept": "application/json", "Content-Type": "application/json"},
            auth_settings=["BearerToken"])
        response = self.api.rest_client.pool_manager.request(
            method, url, headers=headers, body=json.dumps(body).encode() if body else None, timeout=10.0, retries=False)
        return response.status, (json.loads(response.data) if response.data else {})

    def try_acquire(self) -> bool:
        """One attempt to become or stay the holder."""
        now = _now()
        status, lease = self._call("GET", self._path(self.name))
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration, "renewTime": _format(now)}
        if status == 404:
            spec["acquireTime"] = _format(now)
            status, _ = self._call("POST", self._path(), {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                         "metadata": {"name": self.name}, "spec": spec})
            return status == 201
        if status != 200:
            raise OSError(f"lease {self.namespace}/{self.name}: {status} {lease.get('message')}")
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        renewed = _parse(current.get("renewTime"))
        expired = renewed is None or (now - renewed).total_seconds() > (current.get("leaseDurationSeconds")
                                                                         or self.duration)
        if holder and holder != self.identity and not expired:
            return False
        if holder != self.identity:
            spec["acquireTime"] = _format(now)
            spec["leaseTransitions"] = (current.get("leaseTransitions") or 0) + 1
        else:
            spec["acquireTime"] = current.get("acquireTime") or _format(now)
            spec["leaseTransitions"] = current.get("leaseTransitions") or 0
        lease["spec"] = spec
        status, _ = self._call("PUT", self._path(self.name), lease)
        return status == 200

    def acquire(self) -> None:
        """Block until this candidate holds the Lease, then keep renewing it in a thread."""
        while not self.stop.is_set():
            try:
                if self.try_acquire():
                    break
            except OSError as exc:
                log.warning("%s", exc)
            self.stop.wait(self.duration / 3)
        log.info("leader: %s holds lease %s/%s", self.identity, self.namespace, self.name)
        threading.Thread(target=self._renew, name="lease", daemon=True).start()

    def _renew(self) -> None:
        last = time.monotonic()
        while not self.stop.wait(self.duration / 3):
            try:
                if self.try_acquire():
                    last = time.monotonic()
                    continue
            except OSError as exc:
                log.warning("renewing: %s", exc)
            if time.monotonic() - last > self.duration * 2 / 3:
                log.error("leader: lost lease %s/%s", self.namespace, self.name)
                self.lost.set()
                return
