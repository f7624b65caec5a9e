"""The webhook's `Policy` and `PolicyException` objects: watched, loaded one by one, and given a status.

Why one by one: the files of policies/ and the config load all or nothing (a half-loaded bundle never serves),
but cluster objects are written by many people at different times, and one bad object must not stop the webhook
nor cost the others. So the files (and the config) stay all or nothing, and each object is checked alone with
the full load-time check (schema, CEL checker, cost bound: language/objects.py). An object that fails is left
out and its status says why (`Loaded` False, the error at line:col of the stored object); if an earlier
generation of it loaded, that one keeps being enforced (dropping it would lower scrutiny because someone made a
typo) and the message says so. A new engine is swapped in with server.EngineSource.swap, as for files.

Transport: one thread per kind lists and then watches (like inputs/livefacts.py); while the CRD is not
installed (404) there are none and the list is asked again every `retry` seconds. A change of an object's
generation (not of its status) wakes the reloader at once (`wait`). Status: each worker writes the status it
computed when the stored one differs (PUT to the status subresource, the only write the webhook's RBAC grants);
two workers compute the same status, so a conflict (409) is simply left to the next event.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from typing import Any, Optional

from webhook.language.objects import (EXCEPTION_PLURAL, GROUP, POLICY_PLURAL, VERSION, label,
                                      load_exception_object, load_policy_object)

log = logging.getLogger("aiadmit.objects")

MAX_MESSAGE = 4000  # characters of problems in a condition message (the API allows 32768)


def _key(obj: dict) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _identity(obj: dict) -> tuple[str, Any]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("uid") or ""), meta.get("generation"))


class ClusterObjects:
    """The live Policy and PolicyException objects, and what the last engine built of them."""

    def __init__(self, api_client=None, watch_seconds: int = 50, retry: float = 5.0):
        self.api_client, self.watch_seconds, self.retry = api_client, watch_seconds, retry
        self._lock = threading.Lock()
        self._objects: dict[tuple, dict] = {}
        self._listed: set[str] = set()
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._good: dict[str, tuple[Any, Any]] = {}  # uid -> (generation, Policy) last loaded
        self._desired: dict[tuple, tuple] = {}  # key -> (uid, generation, condition)
        self._local = threading.local()
        self._files: Optional[tuple] = None  # (signature of the files and config, their compiled policies)

    # ------------------------------------------------------------------ the objects
    def revision(self) -> tuple:
        """Changes when an object is added, removed or gets a new generation (a status write changes nothing)."""
        with self._lock:
            return tuple(sorted((key, _identity(obj)) for key, obj in self._objects.items()))

    def synced(self) -> bool:
        return self._listed >= {"Policy", "PolicyException"}

    def wait_synced(self, timeout: float) -> bool:
        pause = threading.Event()
        for _ in range(int(timeout * 10)):
            if self.synced():
                return True
            pause.wait(0.1)
        return self.synced()

    def wait(self, timeout: float) -> bool:
        """Block until an object changed or `timeout` passed; True on a change."""
        changed = self._changed.wait(timeout)
        self._changed.clear()
        return changed

    def replace(self, kind: str, items: list[dict]) -> None:
        with self._lock:
            before = {k: _identity(o) for k, o in self._objects.items() if k[0] == kind}
            for key in [k for k in self._objects if k[0] == kind]:
                del self._objects[key]
            for obj in items:
                obj.setdefault("kind", kind)
                self._objects[_key(obj)] = obj
            after = {k: _identity(o) for k, o in self._objects.items() if k[0] == kind}
            self._listed.add(kind)
        if before != after:
            self._changed.set()
        for obj in items:
            self.write_status(obj)

    def apply(self, event_type: str, obj: dict) -> None:
        if not isinstance(obj, dict) or event_type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        key = _key(obj)
        with self._lock:
            old = self._objects.get(key)
            if event_type == "DELETED":
                self._objects.pop(key, None)
            else:
                self._objects[key] = obj
        if event_type == "DELETED" or old is None or _identity(old) != _identity(obj):
            self._changed.set()
        elif event_type != "DELETED":
            self.write_status(obj)  # same generation: perhaps a status write lost a race; write ours again

    def identity(self, obj: dict) -> Optional[tuple[str, Any]]:
        """(uid, generation) of the object held under `obj`'s key, None when none is."""
        with self._lock:
            held = self._objects.get(_key(obj))
        return None if held is None else _identity(held)

    def keep_only(self, kind: str, uids: set) -> bool:
        """Forget the objects of `kind` whose uid is not in `uids` (after a list); True when one was forgotten."""
        with self._lock:
            gone = [k for k, o in self._objects.items() if k[0] == kind and _identity(o)[0] not in uids]
            for key in gone:
                del self._objects[key]
        return bool(gone)

    def _snapshot(self, kind: str) -> list[dict]:
        with self._lock:
            return [o for k, o in sorted(self._objects.items()) if k[0] == kind]

    # ------------------------------------------------------------------ the engine
    def engine(self, policy_paths, config_path, own_namespace):
        """Files and config (all or nothing: raises as Engine.load does), plus every object that loads."""
        from webhook.engine.core import Engine
        from webhook.language.bundle import BUILTIN_POLICY_DIR
        from webhook.language.checks import Checks
        from webhook.language.config import load_config
        from webhook.language.loader import load_all

        from webhook.app.reloader import _signature
        from webhook.language.loader import policy_files

        checks = Checks()
        config = load_config(config_path, own_namespace, checks)
        params = config.params()
        paths = list(policy_paths or [BUILTIN_POLICY_DIR])
        # The files' policies, compiled, are kept while neither they nor the config change: an object's change
        # then costs the compiling of that object, not of the whole bundle (~1 s here).
        key = (_signature(sorted(set(policy_files(paths) + paths + ([config_path] if config_path else [])))),
               own_namespace)
        same_files = self._files is not None and self._files[0] == key
        if same_files:
            files, intree = self._files[1]
        else:
            files, intree = load_all(paths, params, checks, config.cel_limits)  # the in-tree VAPs too, as Engine.load
            self._files = (key, (files, intree))
        defined = {p.id: p.source for p in files}
        policies, desired, good = list(files), {}, {}
        for obj in self._snapshot("Policy"):
            uid, generation = _identity(obj)
            previous = self._good.get(uid)
            if same_files and previous is not None and previous[0] == generation:
                policy, problems = previous[1], []  # this generation compiled, params unchanged: the same policy
            else:
                policy, problems = load_policy_object(obj, params, checks, config.cel_limits)
            if policy is not None and policy.id in defined:
                problems, policy = [f"{label(obj)}:1:1: metadata.name: policy {policy.id!r} is already defined in "
                                    f"{defined[policy.id]}"], None
            kept = self._good.get(uid) if policy is None else (generation, policy)
            if kept is not None and kept[1].id in defined:  # a file took the id since: files win
                kept = None
            if kept is not None:
                good[uid] = kept
                policies.append(kept[1])
                defined[kept[1].id] = label(obj)
            desired[_key(obj)] = (uid, generation, _condition(generation, problems, kept))
        self._good = good
        exceptions = []
        for obj in self._snapshot("PolicyException"):
            uid, generation = _identity(obj)
            exception, problems = load_exception_object(obj, defined)
            if exception is not None:
                exceptions.append(exception)
            desired[_key(obj)] = (uid, generation, _condition(generation, problems, None))
        config.exceptions = tuple(config.exceptions) + tuple(exceptions)
        engine = Engine(policies, config, intree)
        with self._lock:
            self._desired = desired
        return engine

    def conditions(self) -> dict[str, dict]:
        """The Loaded condition the last engine computed for each object, by `Kind/[namespace/]name`."""
        with self._lock:
            return {"/".join(p for p in key if p): found[2] for key, found in self._desired.items()}

    def write_statuses(self) -> None:
        for kind in ("Policy", "PolicyException"):
            for obj in self._snapshot(kind):
                self.write_status(obj)

    def write_status(self, obj: dict) -> None:
        """PUT the status computed for this generation when the stored one differs; never raises."""
        key, (uid, generation) = _key(obj), _identity(obj)
        with self._lock:
            found = self._desired.get(key)
        if found is None or found[:2] != (uid, generation) or self.api_client is None:
            return
        condition = dict(found[2])
        current = next((c for c in ((obj.get("status") or {}).get("conditions") or ())
                        if isinstance(c, dict) and c.get("type") == "Loaded"), None)
        if current is not None and all(current.get(k) == condition[k]
                                       for k in ("status", "reason", "message", "observedGeneration")):
            return
        if current is not None and current.get("status") == condition["status"]:
            condition["lastTransitionTime"] = current.get("lastTransitionTime") or condition["lastTransitionTime"]
        body = dict(obj, status={"observedGeneration": generation, "conditions": [condition]})
        try:
            api = self._api()
            kind, namespace, name = key
            plural = POLICY_PLURAL if kind == "Policy" else EXCEPTION_PLURAL
            if namespace:
                api.replace_namespaced_custom_object_status(GROUP, VERSION, namespace, plural, name, body,
                                                            _request_timeout=(5, 15))
            else:
                api.replace_cluster_custom_object_status(GROUP, VERSION, plural, name, body,
                                                         _request_timeout=(5, 15))
        except Exception as exc:  # a conflict (the other worker wrote first), a deleted object, the API down
            status = getattr(exc, "status", None)
            if status not in (404, 409):
                log.warning("status write failed", extra={"fields": {"object": label(obj), "error": str(exc)[:300]}})

    # ------------------------------------------------------------------ transport
    def _api(self):
        """A client per thread (gevent's sockets are bound to the thread that opened them: inputs/livefacts.py)."""
        api = getattr(self._local, "api", None)
        if api is None:
            from kubernetes import client

            api = self._local.api = client.CustomObjectsApi(client.ApiClient(self.api_client.configuration))
        return api

    def start(self) -> "ClusterObjects":
        for kind, plural in (("Policy", POLICY_PLURAL), ("PolicyException", EXCEPTION_PLURAL)):
            threading.Thread(target=self.run, args=(kind, plural), name=f"aiadmit-objects-{plural}",
                             daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._changed.set()

    def run(self, kind: str, plural: str) -> None:
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        failures = 0
        while not self._stop.is_set():
            try:
                call = self._api().list_cluster_custom_object
                response = call(GROUP, VERSION, plural, _preload_content=False, _request_timeout=(5, 30))
                data = json.loads(response.data)
                self.replace(kind, data.get("items") or [])
                version = (data.get("metadata") or {}).get("resourceVersion")
                failures = 0
                while not self._stop.is_set():
                    stream = watch.Watch()
                    for event in stream.stream(call, GROUP, VERSION, plural, resource_version=version,
                                               timeout_seconds=self.watch_seconds, allow_watch_bookmarks=True,
                                               deserialize=False, _request_timeout=(5, self.watch_seconds + 15)):
                        obj = event.get("object") or {}
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        self.apply(event.get("type", ""), obj)
                        if self._stop.is_set():
                            stream.stop()
                            break
            except ApiException as exc:
                if exc.status == 410:
                    continue
                if exc.status == 404:  # the CRD is not installed: there are none; look again soon
                    self.replace(kind, [])
                    self._stop.wait(self.retry)
                    continue
                failures += 1
                self._failed(kind, f"API error {exc.status}: {exc.reason}", failures)
            except Exception as exc:
                failures += 1
                self._failed(kind, f"{type(exc).__name__}: {exc}", failures)

    def _failed(self, kind: str, why: str, failures: int) -> None:
        delay = min(30.0, 0.5 * 2 ** min(failures, 6))
        log.warning("cluster %s watch failed", kind, extra={"fields": {"error": why[:300], "retry_in_s": delay}})
        self._stop.wait(delay)


def _condition(generation, problems: list[str], kept) -> dict:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if not problems:
        return {"type": "Loaded", "status": "True", "reason": "Loaded", "message": "loaded and enforced",
                "observedGeneration": generation, "lastTransitionTime": now}
    message = "\n".join(problems[:20])[:MAX_MESSAGE]
    if kept is not None and kept[0] != generation:
        message += f"\ngeneration {kept[0]} of this object keeps being enforced"
    return {"type": "Loaded", "status": "False", "reason": "Invalid", "message": message,
            "observedGeneration": generation, "lastTransitionTime": now}
