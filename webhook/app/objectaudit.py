"""The audit reads the same Policy and PolicyException objects as the webhook: from the cluster (`--cluster`), or
as documents among its input files (offline), so that an audit says what the webhook would do.

Each object is checked alone with the webhook's full load-time check (language/objects.py); one that fails is
reported (from a file: `file:line:col`; from the cluster: `Policy/NAME:line:col` of its stored form) and left
out, and the audit exits 2, as for any input it could not read. The files' policies and the config are loaded
as always (all or nothing).
"""

from __future__ import annotations

import os
import stat
from typing import Optional

from webhook.engine.core import Engine
from webhook.inputs.sources import iter_manifest_files, load_paths
from webhook.inputs.sources import Loaded
from webhook.language.loader import compile_loaded
from webhook.model.valueclass import replace

MARKER = b"aiadmit.dev/"  # a file without it holds no aiadmit object: not parsed twice


def from_files(paths: list[str]) -> tuple[Loaded, list]:
    """The Policy documents (as a Loaded, with file positions) and the PolicyException resources of the input."""
    chosen = []
    for path in iter_manifest_files(paths):
        if path == "-":
            continue  # stdin is read once, by the audit itself
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                continue  # a FIFO or a device would block here; the audit itself says what it cannot read
            with open(path, "rb") as handle:
                if MARKER not in handle.read():
                    continue
        except OSError:
            continue  # the audit itself reports what it cannot read
        chosen.append(path)
    found = Loaded()
    exceptions = []
    if chosen:
        from webhook.language import objects  # the object checks: only for an input that holds such objects

        loaded = load_paths(chosen, templates=False)
        found.resources = [r for r in loaded.resources if objects.is_policy(r.obj)]
        exceptions = [r for r in loaded.resources if objects.is_exception(r.obj)]
    return found, exceptions


def from_cluster(api) -> tuple[list[dict], list[dict]]:
    """Every Policy and PolicyException of the cluster (none while the CRDs are not installed)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from webhook.language.objects import EXCEPTION_PLURAL, GROUP, POLICY_PLURAL, VERSION

    custom = client.CustomObjectsApi(api)
    out = []
    for kind, plural in (("Policy", POLICY_PLURAL), ("PolicyException", EXCEPTION_PLURAL)):
        try:
            items = custom.list_cluster_custom_object(GROUP, VERSION, plural, _request_timeout=(5, 60))["items"]
        except ApiException as exc:
            if exc.status != 404:
                from webhook.app.clusteraudit import ClusterError

                raise ClusterError(f"cannot list {plural}.{GROUP}: {exc.status} {exc.reason} (the audit would miss "
                                   f"the policies and exceptions the webhook enforces)") from None
            items = []
        out.append([dict(item, kind=kind, apiVersion=f"{GROUP}/{VERSION}") for item in items])
    return out[0], out[1]


def extend(engine: Engine, policies=None, exceptions=None, files: Optional[Loaded] = None,
           file_exceptions=()) -> tuple[Engine, list[str]]:
    """The engine with these objects' policies and exceptions added, and the problems of those that failed."""
    if not policies and not exceptions and not file_exceptions and (files is None or not files.resources):
        return engine, []  # nothing to add (a one-file audit's usual case): the object checks are not even imported
    from webhook.language.objects import _schema_view, load_exception_object, load_policy_object

    config = engine.config
    params, limits = config.params(), config.cel_limits
    added, problems = [], []
    defined = {p.id: p.source for p in engine.by_id.values()}
    # A file that is also one of the engine's policy files (`--policies my-policies` and a pre-commit run over
    # the same repository) is the same policy, not a second one.
    loaded_from = {os.path.realpath(p.source) for p in engine.by_id.values() if p.source}
    if files is not None:
        files.resources = [r for r in files.resources if os.path.realpath(r.origin.file or "") not in loaded_from]
    if files is not None and files.resources:
        compiled, found = compile_loaded(files, params, None, limits, prepare=_schema_view)
        added += compiled
        problems += found
    for obj in policies or ():
        policy, found = load_policy_object(obj, params, None, limits)
        problems += found
        if policy is not None:
            added.append(policy)
    for policy in added[:]:
        if policy.id in defined:
            problems.append(f"{policy.source}: metadata.name: policy {policy.id!r} is already defined in "
                            f"{defined[policy.id]}")
            added.remove(policy)
        else:
            defined[policy.id] = policy.source
    extra = []
    for obj, resource in [(o, None) for o in exceptions or ()] + [(r.obj, r) for r in file_exceptions]:
        exception, found = load_exception_object(obj, defined, resource)
        problems += found
        if exception is not None:
            extra.append(exception)
    if not added and not extra:
        return engine, problems
    config = replace(config, exceptions=tuple(config.exceptions) + tuple(extra))
    return Engine(list(engine.by_id.values()) + added, config), problems
