"""The policy reloader: a new engine when the policy files, the config or the cluster's Policy objects change.

Each worker polls the modification signature of the policy files and the config file, and (with
app/clusterobjects.py) the revision of the cluster's Policy and PolicyException objects, which also wakes it at
once; on change it loads a complete new engine and swaps it in with one assignment (server.EngineSource.swap).
A set that fails to load is logged with every problem, counted (`aiadmit_policy_reloads_total{outcome="failure"}`),
and the old set keeps serving.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Optional

from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.loader import policy_files

log = logging.getLogger("aiadmit.serving")


def _signature(paths: list[str]) -> tuple:
    """What changes when any of `paths` is replaced or rewritten (follows symlinks: Kubernetes volumes swap them)."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
            out.append((path, st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((path, None))
    return tuple(out)


class PolicyReloader:
    """Polls the policy and config files; swaps in a fully loaded engine when they change."""

    def __init__(self, options, source, metrics, objects=None):
        self.options, self.source, self.metrics, self.objects = options, source, metrics, objects
        self._signature = self.signature()
        self._stop = threading.Event()

    def watched(self) -> list[str]:
        paths = list(self.options.policies or [BUILTIN_POLICY_DIR])
        files = policy_files(paths)
        return sorted(set(files + paths + ([self.options.config] if self.options.config else [])))

    def signature(self) -> tuple:
        revision = self.objects.revision() if self.objects is not None else ()
        try:
            return _signature(self.watched()) + revision
        except OSError:
            return revision

    def check(self) -> Optional[bool]:
        """None: nothing changed; True: new set serving; False: new set rejected."""
        signature = self.signature()
        if signature == self._signature:
            return None
        self._signature = signature
        from webhook.language.config import ConfigError
        from webhook.engine.core import Engine
        from webhook.language.policy import PolicyLoadError

        try:
            load = self.objects.engine if self.objects is not None else Engine.load
            engine = load(self.options.policies or None, self.options.config,
                          self.options.own_namespace).prepare()  # compiled here, not in reviews
        except (PolicyLoadError, ConfigError) as exc:
            problems = exc.problems
        except Exception as exc:  # anything else a broken file can provoke
            problems = [f"{type(exc).__name__}: {exc}"]
        else:
            self.source.swap(engine)
            if self.objects is not None:
                self.objects.write_statuses()  # each object's Loaded condition, as this engine took it
            self.metrics.reloads.labels("success").inc()
            self.metrics.generation.set(self.source.generation)
            self.metrics.policies.set(len(engine.policies))
            log.info("policy set reloaded", extra={"fields": {"generation": self.source.generation,
                                                              "policies": len(engine.policies)}})
            return True
        self.metrics.reloads.labels("failure").inc()
        log.error("policy reload rejected; the previous set keeps serving",
                  extra={"fields": {"generation": self.source.generation, "problems": problems[:20]}})
        return False

    def start(self) -> None:
        def loop():
            while not self._stop.is_set():
                if self.objects is not None:
                    self.objects.wait(self.options.reload_interval)  # an object's change wakes it at once
                elif self._stop.wait(self.options.reload_interval):
                    break
                try:
                    self.check()
                except Exception:
                    log.exception("policy reload check failed")

        threading.Thread(target=loop, name="aiadmit-reload", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
