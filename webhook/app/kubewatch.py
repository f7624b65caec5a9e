"""List once, then watch from the list's resourceVersion: what the reports controller reads a kind with.

The API server's own contract (client-go's reflector does the same): a paginated
list (`limit`/`continue`) gives the objects and a resourceVersion; a watch from
that version with `allowWatchBookmarks=true` streams every change after it, and
BOOKMARK events move the version forward while nothing of the kind changes, so
a watch that ends (the server closes it after `timeoutSeconds`) is reopened
from where it stopped, never relisted. Only `410 Gone` (the version fell out of
etcd's compaction window) forces a new list; `relists` counts them.

Each event reaches `handle(type, object)` (type LIST for a listed object); a relist ends with `handle("SYNC",
{uids seen})` so the caller can drop objects deleted while it was not watching.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Callable, Optional

from webhook.app.clusteraudit import PAGE_SIZE, ApiResource, ClusterError, _get

WATCH_SECONDS = 300  # the server closes a watch after this; it is reopened from the last resourceVersion
log = logging.getLogger("aiadmit.reports")


class Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class KindWatcher:
    """One kind, cluster-wide: a paginated list, then watches; run() until `stop` is set."""

    def __init__(self, api, resource: ApiResource, handle: Callable[[str, dict], None],
                 count: Callable[[str], None] = lambda verb: None, page_size: int = PAGE_SIZE,
                 stop: Optional[threading.Event] = None, failed: Callable[[], None] = lambda: None):
        self.api = api
        self.resource = resource
        self.handle = handle
        self.count = count  # called with "list" or "watch" for every request made
        self.page_size = page_size
        self.stop = stop or threading.Event()
        self.failed = failed  # called for every failed list or watch (a 403: a permission the role lacks)
        self.version = ""
        self.relists = 0
        self.listed = threading.Event()  # set after the first complete list

    def items(self, namespace: Optional[str] = None, meta: Optional[dict] = None):
        """Every object of the kind (in one namespace), page by page; the last page's metadata into `meta`."""
        token = None
        while True:
            query = [("limit", self.page_size)] + ([("continue", token)] if token else [])
            self.count("list")
            page = _get(self.api, self.resource.path(namespace), query)
            for item in page.get("items") or ():
                item.setdefault("apiVersion", self.resource.api_version)
                item.setdefault("kind", self.resource.kind)
                yield item
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                if meta is not None:
                    meta.update(page.get("metadata") or {})
                return

    def list(self) -> None:
        seen: set = set()
        meta: dict = {}
        for item in self.items(meta=meta):
            seen.add(item["metadata"].get("uid"))
            self.handle("LIST", item)  # ADDED, from a list: present before, or missed while not watching
        self.version = meta.get("resourceVersion", "")
        self.handle("SYNC", {"uids": seen})
        self.listed.set()

    def watch_once(self) -> None:
        """One watch request from `self.version`, until the server closes it; raises Gone on 410."""
        path = self.resource.path()
        query = [("watch", "true"), ("allowWatchBookmarks", "true"), ("resourceVersion", self.version),
                 ("timeoutSeconds", WATCH_SECONDS)]
        method, url, headers, _, _ = self.api.param_serialize("GET", path, query_params=query,
                                                              header_params={"Accept": "application/json"},
                                                              auth_settings=["BearerToken"])
        import urllib3

        self.count("watch")
        response = self.api.rest_client.pool_manager.request(
            method, url, headers=headers, preload_content=False,
            timeout=urllib3.Timeout(connect=10, read=WATCH_SECONDS + 30))
        try:
            if response.status == 410:
                raise Gone()
            if response.status != 200:
                raise ClusterError(f"watch {path}: {response.status} {response.reason}")
            buffer = b""
            for chunk in response.stream(65536, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        self._event(json.loads(line))
                if self.stop.is_set():
                    return
        finally:
            response.release_conn()

    def _event(self, event: dict) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ClusterError(f"watch {self.resource.plural}: {obj.get('message')}")
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind != "BOOKMARK":
            obj.setdefault("apiVersion", self.resource.api_version)
            obj.setdefault("kind", self.resource.kind)
            self.handle(kind, obj)
        if version:
            self.version = version

    def run(self) -> None:
        backoff = 1.0
        need_list = True
        while not self.stop.is_set():
            try:
                if need_list:
                    self.list()
                    need_list = False
                self.watch_once()
                backoff = 1.0
            except Gone:
                self.relists += 1
                need_list = True
                log.info("%s: resourceVersion %s gone, listing again", self.resource.plural, self.version)
            except (ClusterError, OSError, ValueError, Exception) as exc:  # noqa: BLE001 - a watcher never dies
                log.warning("%s: %s (retrying in %.0fs)", self.resource.plural, exc, backoff)
                self.failed()
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
