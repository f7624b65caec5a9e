"""`aiadmit reports-controller`: one PolicyReport (or OpenReports Report) per namespace, kept current.

Data flow: a KindWatcher per served pod-bearing kind and per fact kind
(webhook.app.kubewatch: one paginated list, then watches with bookmarks) ->
an event queue -> one evaluating thread (the engine, the facts from the watched
fact kinds, the PolicyReport results of the object: `policyreport.fragment`) ->
the ReportStore (results only; no object is kept) -> one writing thread that
writes each namespace whose results changed (ReportWriter), at most once per
`interval` per namespace, so a burst of changes in a namespace is one write.

What a change affects:
- an object of an audited kind: that object, so its namespace's report;
- an object a listed controller owns (a Deployment's ReplicaSet, a Job's Pod):
  nothing (the owner's results stand for it, as in `audit --cluster`);
- a namespaced fact (a Namespace's labels, a ResourceQuota, a LocalQueue ...):
  every object of that namespace, read again with one list per kind scoped to
  it (objects are not kept, so they are read; no cluster-wide relist);
- a cluster-scoped fact (PriorityClass, RuntimeClass, a Node's labels):
  everything, read again by a relist of each kind (counted in
  aiadmit_reports_resyncs_total);
- a policy change: the cluster's `Policy` and `PolicyException` objects
  (aiadmit.dev, watched like the rest and loaded one by one exactly as the
  webhook loads them: app/clusterobjects.py) or the policy files (their mtimes,
  polled): the new engine is compared with the old (app/reportscope.py), and
  only what it may judge differently is read again: a namespaced exception,
  its namespace (and only the kinds it and its policies admit); a policy, the
  kinds it matches, cluster-wide (aiadmit_reports_cluster_object_changes_total).
Fact objects are compared on what facts read (labels, spec, status less its
conditions and heartbeats), so a Node's status heartbeat changes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import re
import threading
import time
from typing import Callable, Optional

from webhook.app.clusteraudit import FACT_KINDS, ListedFacts, _owned_by_listed, audited_kinds, discover
from webhook.app.kubewatch import KindWatcher
from webhook.app.reportscope import affected, plan
from webhook.app.reportstore import ReportStore, encode
from webhook.app.reportwriter import ReportWriter
from webhook.model.resource import Origin, Resource
from webhook.outputs.reports import policyreport

log = logging.getLogger("aiadmit.reports")
_STAMP = re.compile(rb'"timestamp":\{"seconds":\d+,"nanos":0\}')
CLUSTER_FACTS = {"PriorityClass.scheduling.k8s.io", "RuntimeClass.node.k8s.io", "Node"}


def kind_id(group: str, kind: str) -> str:
    """"Kind" for the core group, else "Kind.group": Volcano's Job is not batch's."""
    return f"{kind}.{group}" if group else kind


FACT_IDS = {kind_id(group, kind) for group, kind in FACT_KINDS}
OBJECT_KINDS = {("aiadmit.dev", "Policy"), ("aiadmit.dev", "PolicyException")}
OBJECT_IDS = {kind_id(group, kind) for group, kind in OBJECT_KINDS}


def _fact_view(obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    status = {k: v for k, v in (obj.get("status") or {}).items()
              if k not in ("conditions", "heartbeatTime", "daemonEndpoints", "images")}
    return (meta.get("labels"), meta.get("annotations"), obj.get("spec"), status, obj.get("value"),
            obj.get("handler"), obj.get("globalDefault"), obj.get("preemptionPolicy"))


class Controller:
    def __init__(self, api, engine, engine_loader: Callable, metrics, context: str = "in-cluster",
                 writer: Optional[ReportWriter] = None, interval: float = 1.0, page_size: int = 500,
                 reload_paths: tuple = (), objects=None):
        self.api = api
        self.load_engine = engine_loader
        self.engine = engine
        self.metrics = metrics
        self.context = context
        self.writer = writer or ReportWriter(api)
        self.interval = interval
        self.page_size = page_size
        self.store = ReportStore()
        # bounded: a list faster than evaluation waits instead of holding whole objects (the watchers block)
        self.events: queue.Queue = queue.Queue(maxsize=1000)
        # (namespace or None: all, kind id or None: all) a fact or policy change asks to read again
        self.resync_wanted: set = set()
        self.stop = threading.Event()
        self.facts_objects: dict[tuple, tuple] = {}  # (kind, ns, name) -> (fact view, Resource)
        self.facts: Optional[ListedFacts] = None
        self.watchers: dict[str, KindWatcher] = {}
        self.audited: set[str] = set()  # kind ids (kind_id) of the audited kinds
        self.owner_kinds: set[str] = set()  # their kind names: an owner reference names no group
        self.reload_paths = reload_paths
        self.objects = objects  # app/clusterobjects.ClusterObjects fed by this controller's watchers, or None
        self.objects_listed: set[str] = set()  # the object kinds whose first list was read
        self._objects_dirty = False  # an object listed since the engine was built
        self.served: set[tuple] = set()
        self.synced = threading.Event()

    # -- reading -------------------------------------------------------------
    def _count(self, kind: str) -> Callable[[str], None]:
        return lambda verb: self.metrics.requests.labels(kind=kind, verb=verb).inc()

    def start(self) -> None:
        self.writer.load_existing()
        extra = OBJECT_KINDS if self.objects is not None else set()
        served = discover(self.api, audited_kinds(self.engine) | set(FACT_KINDS) | extra)
        self.served = set(served)
        self._audit(self.engine)
        for key, resource in sorted(served.items()):
            kid = kind_id(*key)
            handle = (lambda kid: lambda type_, obj: self.events.put((type_, kid, obj, time.time())))(kid)
            watcher = KindWatcher(self.api, resource, handle, self._count(kid), self.page_size, self.stop,
                                  (lambda kid: lambda: self.metrics.watch_failures.labels(kind=kid).inc())(kid))
            self.watchers[kid] = watcher
        # facts and policy objects first, so the first evaluations see every namespace and every policy
        order = [self.watchers[kid] for kid in sorted(self.watchers,
                                                      key=lambda kid: kid not in FACT_IDS | OBJECT_IDS)]
        threads = [threading.Thread(target=self._evaluate_loop, name="evaluate", daemon=True),
                   threading.Thread(target=self._write_loop, name="write", daemon=True)]
        if self.reload_paths:
            threads.append(threading.Thread(target=self._reload_loop, name="reload", daemon=True))
        for thread in threads:
            thread.start()
        for watcher in order:
            thread = threading.Thread(target=watcher.run, name=f"watch-{watcher.resource.plural}", daemon=True)
            thread.start()
            if kind_id(watcher.resource.group, watcher.resource.kind) in FACT_IDS | OBJECT_IDS:
                watcher.listed.wait(300)  # a fact or policy kind: listed before the objects that read it

    def _audit(self, engine) -> None:
        """The audited kinds of `engine` that the cluster serves (a Policy may name a fact kind in match.kinds)."""
        wanted = audited_kinds(engine)
        self.audited = {kind_id(*key) for key in wanted if key in self.served}
        self.owner_kinds = {key[1] for key in wanted if key in self.served}

    # -- evaluating ----------------------------------------------------------
    def _evaluate_loop(self) -> None:
        while not self.stop.is_set():
            while self.resync_wanted:
                wanted, self.resync_wanted = self.resync_wanted, set()
                for namespace, kinds in plan(wanted, self.audited):
                    try:
                        self._relist(namespace, kinds)
                    except Exception as exc:  # noqa: BLE001 - asked again on the next change
                        log.warning("reading %s again: %s", namespace or "every namespace", exc)
            try:
                type_, kind, obj, when = self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                self._event(type_, kind, obj, when)
            except Exception as exc:  # noqa: BLE001 - one bad object never stops the others
                meta = obj.get("metadata") or {}
                log.warning("%s %s/%s: %s", kind, meta.get("namespace"), meta.get("name"), exc)
            finally:
                self.events.task_done()  # unfinished_tasks counts the event being evaluated too
                self.metrics.pending.set(self.events.qsize())

    def _event(self, type_: str, kind: str, obj: dict, when: float) -> None:
        if kind in OBJECT_IDS:
            self._cluster_object(type_, kind, obj)
            return
        if type_ == "SYNC":
            self._sync(kind, obj["uids"], when)
            return
        if type_ == "RELOAD":  # the policy files changed
            self._swap("policy files")
            return
        meta = obj.get("metadata") or {}
        key = (kind, meta.get("namespace") or "", meta.get("name"))
        if kind in FACT_IDS:
            self._fact(type_, key, obj)
        if kind not in self.audited:
            return
        if type_ == "DELETED" or _owned_by_listed(obj, self.owner_kinds):
            self.store.delete(key, when)
            return
        self._evaluate(key, obj, when)

    def _evaluate(self, key, obj: dict, when: float) -> None:
        if self.facts is None:
            self.facts = ListedFacts([resource for _, resource in self.facts_objects.values()])
        resource = Resource(obj, Origin(cluster=self.context))
        evaluation = self.engine.evaluate(resource, self.facts)
        self.metrics.evaluated.inc()
        namespace, results = policyreport.fragment(evaluation, self.engine)
        if not results:
            self.store.delete(key, when)
            return
        blob = encode(results)
        digest = hashlib.blake2b(_STAMP.sub(b"", blob), digest_size=16).digest()
        self.store.put(key, str(obj["metadata"].get("uid", "")), namespace, digest, blob, when)

    def _fact(self, type_: str, key: tuple, obj: dict) -> None:
        view = None if type_ == "DELETED" else _fact_view(obj)
        old = self.facts_objects.get(key)
        if (old[0] if old else None) == view:
            return
        if view is None:
            self.facts_objects.pop(key, None)
        else:
            self.facts_objects[key] = (view, Resource(obj, Origin(cluster=self.context)))
        self.facts = None
        if type_ == "LIST" and old is None:
            return  # listed: the audited kinds are listed after their facts (or, after a 410, seen again anyway)
        if key[0] == "Namespace" and old is None:
            return  # a new namespace: its objects arrive after it
        namespace = None if key[0] in CLUSTER_FACTS else (key[2] if key[0] == "Namespace" else key[1])
        self.resync_wanted.add((namespace, None))  # not queued: this thread is the queue's only consumer

    def _cluster_object(self, type_: str, kind: str, obj: dict) -> None:
        """A Policy or PolicyException event: a new engine when the object's uid or generation changed.

        A status write (the webhook's Loaded condition) is the same generation: nothing. The first list of each kind
        is read before any audited object, so it swaps the engine without reading anything again."""
        name = kind.split(".")[0]
        if type_ == "SYNC":
            first = kind not in self.objects_listed
            self.objects_listed.add(kind)
            if self.objects.keep_only(name, obj["uids"]) or first or self._objects_dirty:
                self._objects_dirty = False
                self._swap(f"{name} objects listed", read_again=not first)
            return
        obj.setdefault("kind", name)
        before = self.objects.identity(obj)
        if type_ == "LIST":
            if before != (str((obj.get("metadata") or {}).get("uid") or ""), (obj.get("metadata") or {}).get(
                    "generation")):
                self.objects.apply("ADDED", obj)
                self._objects_dirty = True
            return
        if type_ != "DELETED" and before == (str(obj["metadata"].get("uid") or ""), obj["metadata"].get("generation")):
            return  # a status write
        self.objects.apply(type_, obj)
        label = "/".join(p for p in (name, (obj.get("metadata") or {}).get("namespace"),
                                     (obj.get("metadata") or {}).get("name")) if p)
        self._swap(label)
        condition = self.objects.conditions().get(label) or {}
        outcome = "deleted" if type_ == "DELETED" else ("loaded" if condition.get("status") == "True" else "invalid")
        self.metrics.object_changes.labels(kind=name, outcome=outcome).inc()
        if outcome == "invalid":
            log.warning("%s does not load (its status says why): %s", label, condition.get("message", "")[:500])

    def _swap(self, why: str, read_again: bool = True) -> None:
        """Build the engine again and read again what the new one may judge differently (app/reportscope.py)."""
        try:
            engine = self.load_engine()
        except Exception as exc:  # noqa: BLE001 - a bad policy file keeps the last good engine
            log.warning("%s: the policies do not load; keeping the previous ones: %s", why, exc)
            return
        old, self.engine, self.facts = self.engine, engine, None
        self._audit(engine)
        if not read_again:
            return
        names = {kid: kid.split(".")[0] for kid in self.audited}
        wanted = affected(old, engine, names)
        log.info("%s: the policies changed; reading again %s", why,
                 ", ".join(sorted(f"{k} in {ns or 'every namespace'}" for ns, k in wanted)) or "nothing")
        self.resync_wanted |= wanted

    def _sync(self, kind: str, uids: set, when: float) -> None:
        """After a (re)list: forget the objects of the kind that the list no longer has."""
        if kind not in self.audited:
            return
        for key, uid in self.store.keys_of(kind).items():
            if uid not in uids:
                self.store.delete(key, when)

    def _relist(self, namespace: Optional[str], kinds: Optional[list] = None) -> None:
        """Read again what a fact or policy change affects: these kinds (default all) in one namespace, or all."""
        self.metrics.resyncs.labels(scope="namespace" if namespace else "cluster").inc()
        now = time.time()
        for kind in sorted(self.audited) if kinds is None else kinds:
            seen = set()
            for obj in self.watchers[kind].items(namespace):
                meta = obj["metadata"]
                key = (kind, meta.get("namespace") or "", meta.get("name"))
                seen.add(meta.get("uid"))
                if _owned_by_listed(obj, self.owner_kinds):
                    self.store.delete(key, now)
                else:
                    self._evaluate(key, obj, now)
            if namespace is None:
                self._sync(kind, seen, now)

    def _reload_loop(self) -> None:
        import os

        def stamp():
            out = []
            for path in self.reload_paths:
                for root, _, files in os.walk(path) if os.path.isdir(path) else [("", [], [path])]:
                    for name in files:
                        full = os.path.join(root, name)
                        try:
                            out.append((full, os.stat(full).st_mtime_ns))
                        except OSError:
                            pass
            return sorted(out)

        last = stamp()
        while not self.stop.wait(5.0):
            now = stamp()
            if now == last:
                continue
            last = now
            self.events.put(("RELOAD", "", {}, time.time()))  # loaded by the evaluating thread (_swap)

    # -- writing -------------------------------------------------------------
    def _write_loop(self) -> None:
        while not self.stop.is_set():
            if not self.store.wait_dirty(1.0):
                self._check_synced()
                continue
            started = time.time()
            for namespace, (since, results) in self.store.take_dirty().items():
                problems = self.writer.write(namespace, results)
                if problems:
                    for problem in problems:
                        log.warning("%s", problem)
                    self.store.requeue(namespace, since)
                    self.metrics.write_errors.inc()
                    continue
                self.metrics.written.inc()
                lag = time.time() - since
                self.metrics.lag.observe(lag)
                self.metrics.last_lag.set(lag)
            self.metrics.namespaces.set(len(self.writer.known))
            self._check_synced()
            self.stop.wait(max(0.0, self.interval - (time.time() - started)))

    def _check_synced(self) -> None:
        if self.synced.is_set() or not all(w.listed.is_set() for w in self.watchers.values()):
            return
        objects, dirty = self.store.counts()
        if self.events.unfinished_tasks == 0 and not self.resync_wanted and not dirty:
            self.synced.set()
            self.metrics.synced.set(1)
            log.info("every report written: %d objects", objects)
