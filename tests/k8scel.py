"""Kubernetes' own CEL as a test oracle: the Go tool tests/tools/k8scel, built once per session, fed JSON lines.

Why: aiadmit says its CEL is Kubernetes' CEL (docs/policy-language.md). The only honest check is Kubernetes itself:
the tool builds the ValidatingAdmissionPolicy environment exactly as the API server v1.37 does (k8s.io/apiserver
v0.37.2, cel-go v0.29.2; its compatibility-version gating per query: `compatibility`, `environment` new or stored,
default a new expression on a 1.37 API server, compatibility version 1.36) and answers, for each expression, whether it compiles (with Kubernetes' error text), its value over the
given variables, and cel-go's cost estimate with Kubernetes' cost model. A test tool only, never the product.

The `oracle` fixture builds it with tests/tools/k8scel/build.sh (cached in ~/.cache/aiadmit-e2e/k8scel-<hash>; bounded by
AIADMIT_K8SCEL_BUILD_TIMEOUT seconds, default 900) and raises Unavailable, with the exact reason, when Go is missing
or the build fails: the tests skip with that reason. AIADMIT_K8SCEL=/path uses a prebuilt binary.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from typing import Any, Iterable

import pytest

from gotools import go as _go

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "tools", "k8scel", "build.sh")
TIMEOUT = float(os.environ.get("AIADMIT_K8SCEL_BUILD_TIMEOUT", "900"))
ANSWER_TIMEOUT = 60.0  # one batch of answers; the tool bounds each evaluation to 10 s itself


class Unavailable(RuntimeError):
    """No oracle: the reason says why (no Go, build failed or timed out)."""


_FAILED: list = []  # the reason, once a build failed: not retried by every test of the session


@functools.lru_cache(maxsize=1)
def binary(announce=None) -> str:
    """The oracle's path, built on first call (once per process); Unavailable with the reason otherwise."""
    if _FAILED:
        raise Unavailable(_FAILED[0])
    try:
        return _build(announce) if announce else _build()
    except Unavailable as exc:
        _FAILED.append(str(exc))
        raise


def _build(announce=lambda line: print(line, file=sys.stderr, flush=True)) -> str:
    if os.environ.get("AIADMIT_K8SCEL"):
        return os.environ["AIADMIT_K8SCEL"]
    go = _go()
    env = dict(os.environ, **({"AIADMIT_E2E_GO": go} if go else {}))
    announce("aiadmit: the Kubernetes CEL oracle (tests/tools/k8scel, a Go build of k8s.io/apiserver's CEL) is "
             "located or built by tests/tools/k8scel/build.sh, cached in ~/.cache/aiadmit-e2e: about three minutes "
             f"cold, at once warm (limit {TIMEOUT:.0f} s, AIADMIT_K8SCEL_BUILD_TIMEOUT; -m 'not k8scel' skips it)")
    proc = subprocess.Popen(["bash", BUILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    tail: list[str] = []

    def progress() -> None:  # build.sh's own lines (what it builds and why) as they come
        for line in proc.stderr:
            tail.append(line)
            del tail[:-40]
            if line.startswith("[aiadmit k8scel]"):
                announce(line.rstrip())

    out: list[str] = []
    # Each pipe has one reader: communicate() would read stderr too and close it under the progress thread.
    readers = [threading.Thread(target=progress, daemon=True),
               threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Unavailable(f"tests/tools/k8scel/build.sh did not finish within {TIMEOUT:.0f} s "
                          "(AIADMIT_K8SCEL_BUILD_TIMEOUT)") from None
    for reader in readers:
        reader.join(timeout=10)
    stdout = "".join(out)
    if proc.returncode == 127:
        raise Unavailable("the Kubernetes CEL oracle is not cached and no Go toolchain builds it (Go on PATH, at "
                          "/usr/local/go/bin, or AIADMIT_E2E_GO; or AIADMIT_K8SCEL=prebuilt binary)")
    if proc.returncode != 0:
        raise Unavailable(f"tests/tools/k8scel/build.sh failed (exit {proc.returncode}): {''.join(tail)[-2000:]}")
    return stdout.strip().splitlines()[-1]


class Oracle:
    """One running k8scel process: `ask` sends requests and returns one answer each, in order."""

    def __init__(self, path: str):
        self.proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, encoding="utf-8", bufsize=1)
        self.lock = threading.Lock()

    def ask(self, requests: Iterable[dict]) -> list[dict]:
        lines = [json.dumps(r, ensure_ascii=False, allow_nan=False) for r in requests]
        with self.lock:
            # A writer thread: the answers are read while the requests are still being written (no pipe deadlock).
            writer = threading.Thread(target=self._write, args=(lines,), daemon=True)
            writer.start()
            out = []
            timer = threading.Timer(ANSWER_TIMEOUT + len(lines) * 0.05, self.proc.kill)
            timer.start()
            try:
                for _ in lines:
                    line = self.proc.stdout.readline()
                    if not line:
                        raise RuntimeError(f"k8scel ended: {self.proc.stderr.read()[-2000:]}")
                    out.append(json.loads(line))
            finally:
                timer.cancel()
            writer.join(timeout=10)
        return out

    def one(self, expr: str, **fields: Any) -> dict:
        return self.ask([dict(expr=expr, **fields)])[0]

    def _write(self, lines: list[str]) -> None:
        try:
            for line in lines:
                self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


_RUNNING: list = []


def running(announce=None) -> Oracle:
    """The session's oracle process (Unavailable with the reason when it cannot be built)."""
    if not _RUNNING:
        import atexit

        _RUNNING.append(Oracle(binary(announce)))
        atexit.register(_RUNNING[0].close)
    return _RUNNING[0]


@pytest.fixture(scope="session")
def oracle(request) -> Oracle:
    """The fixture the k8scel tests import: the oracle, or a skip with the exact reason."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def announce(line: str) -> None:  # to the terminal now, even while pytest captures output
        if reporter is None or capture is None:
            print(line, file=sys.__stderr__, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)
    try:
        return running(announce)
    except Unavailable as exc:
        pytest.skip(str(exc))


# ---------------------------------------------------------------------------------------------- comparing values
def _rfc3339(ns: int) -> str:
    import datetime as dt

    seconds, fraction = divmod(ns, 1_000_000_000)
    text = (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{fraction:09d}".rstrip("0") if fraction else "") + "Z"


def same(ours: Any, theirs: Any) -> bool:
    """Whether aiadmit's value `ours` is Kubernetes' value `theirs` (as k8scel writes it: see its main.go).

    A quantity is aiadmit's double in base units: equal when Kubernetes' quantity has that value."""
    import math

    from webhook.cel.parser import UInt
    from webhook.cel.runtime import CelType
    from webhook.cel.timestamps import Duration, Timestamp
    from webhook.cel.values import NONE, Optional

    # A map of the object can look like a tag ({"type": "Unconfined"} is a seccompProfile, not a CEL type): when
    # aiadmit gave a map, it is compared as a map first.
    tagged = isinstance(theirs, dict) and len(theirs) <= 4 and not (
        isinstance(ours, dict) and len(ours) == len(theirs)
        and all(isinstance(k, str) and k in theirs and same(v, theirs[k]) for k, v in ours.items()))
    if tagged:
        if set(theirs) == {"uint"}:
            return isinstance(ours, UInt) and int(ours) == theirs["uint"]
        if set(theirs) == {"double"}:
            wanted = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf}[theirs["double"]]
            return type(ours) is float and (math.isnan(ours) if math.isnan(wanted) else ours == wanted)
        if set(theirs) == {"bytes"}:
            import base64

            return isinstance(ours, bytes) and base64.b64decode(theirs["bytes"]) == ours
        if set(theirs) == {"type"}:
            return isinstance(ours, CelType) and ours.name.split(".")[-1] == theirs["type"].split(".")[-1] \
                .replace("null_type", "null_type")
        if "optional" in theirs and set(theirs) <= {"optional", "none"}:
            if theirs.get("none"):
                return ours is NONE
            return isinstance(ours, Optional) and ours is not NONE and same(ours.value, theirs["optional"])
        if set(theirs) == {"map"} and isinstance(theirs["map"], list):
            return isinstance(ours, dict) and len(ours) == len(theirs["map"]) and all(
                any(same(k, pair[0]) and same(v, pair[1]) for k, v in ours.items()) for pair in theirs["map"])
        kind = theirs.get("@type")
        if kind == "kubernetes.Quantity":
            return type(ours) is float and math.isclose(ours, theirs["float"], rel_tol=1e-12)
        if kind == "google.protobuf.Timestamp":
            return isinstance(ours, Timestamp) and _rfc3339(ours.ns) == theirs["string"]
        if kind == "google.protobuf.Duration":
            return isinstance(ours, Duration) and ours.ns == theirs["nanos"]
        if kind is not None:
            return False  # a Kubernetes type aiadmit has no value of (url, ip, cidr, semver, ...)
    if isinstance(theirs, bool) or theirs is None:
        return ours is theirs
    if isinstance(theirs, int):
        return type(ours) is int and ours == theirs
    if isinstance(theirs, float):
        return type(ours) is float and ours == theirs
    if isinstance(theirs, str):
        return type(ours) is str and ours == theirs
    if isinstance(theirs, list):
        return isinstance(ours, list) and len(ours) == len(theirs) and all(map(same, ours, theirs))
    if isinstance(theirs, dict):
        return isinstance(ours, dict) and len(ours) == len(theirs) and all(
            isinstance(k, str) and k in theirs and same(v, theirs[k]) for k, v in ours.items())
    return False


def outcome(expression: str, run, answer: dict) -> tuple[str, str]:
    """('agree' | 'differ', what) for aiadmit's `run()` (raises CelError at load, anything at run time) against
    Kubernetes' `answer`. Both rejecting at compile time, or both erroring, agree."""
    from webhook.cel.environment import CelError

    try:
        value, ours = run(), None
    except CelError as exc:
        value, ours = None, f"load: {exc}"
    except Exception as exc:  # noqa: BLE001 - any evaluation error is a CEL error
        value, ours = None, f"run: {type(exc).__name__}: {exc}"
    theirs = None if answer["compiled"] and "evalError" not in answer else \
        (answer.get("error") or answer.get("evalError"))
    if ours is not None or theirs is not None:
        if ours is not None and theirs is not None:
            return "agree", "both error"
        return "differ", (f"aiadmit {ours}; Kubernetes gives {json.dumps(answer.get('value'))}" if ours else
                          f"aiadmit gives {value!r}; Kubernetes: {theirs.splitlines()[0]}")
    if same(value, answer.get("value")):
        return "agree", "same value"
    return "differ", f"aiadmit gives {value!r}; Kubernetes {json.dumps(answer.get('value'))}"


def jsonable(value: Any) -> Any:
    """A variable's value as JSON for the oracle (what the engine binds is JSON-shaped); TypeError otherwise."""
    return json.loads(json.dumps(value, allow_nan=False))


# ---------------------------------------------------------------------------------------- the built-in policies
class Builtin:
    """One CEL expression of a built-in policy: where it is, its level, and what it is in aiadmit."""

    __slots__ = ("policy", "where", "level", "expression", "uses")

    def __init__(self, policy, where: str, level: str, expression):
        self.policy, self.where, self.level, self.expression = policy, where, level, expression
        self.uses = extension_uses(expression.source, policy, level)

    @property
    def key(self) -> str:
        return f"{self.policy.id}:{self.where}"


_LEVEL_OF = {"pod": "pod", "podMeta": "pod", "template": "pod", "templateDevices": "pod", "podResources": "pod",
             "podClaims": "pod", "container": "container",
             "containerType": "container", "containerName": "container", "injected": "container",
             "envFrom": "container", "claims": "container"}
_ORDER = ("object", "pod", "container")


def builtins(engine) -> list[Builtin]:
    """Every CEL expression of the loaded policies: named variables, rules' `when`/`expression`, the
    messageExpression or the `{{...}}` segments of the message, and mutations' `when` (their guards)."""
    from webhook.cel.environment import MessageExpression

    found: list[Builtin] = []
    for policy in engine.policies:
        for name, expression in policy.named.items():
            level = max((_LEVEL_OF.get(v, "object") for v in expression.variables), key=_ORDER.index,
                        default="object")
            found.append(Builtin(policy, f"variables.{name}", level, expression))
        for rule in policy.rules:
            for part in ("when", "expression"):
                if getattr(rule, part) is not None:
                    found.append(Builtin(policy, f"{rule.name}.{part}", rule.target, getattr(rule, part)))
            message = rule.message
            if isinstance(message, MessageExpression):
                found.append(Builtin(policy, f"{rule.name}.messageExpression", rule.target, message.expression))
                message = message.fallback
            for i, expression in enumerate(message.expressions if message is not None else ()):
                found.append(Builtin(policy, f"{rule.name}.message{{{{{i}}}}}", rule.target, expression))
        for mutation in policy.mutations:
            if mutation.when is not None:
                found.append(Builtin(policy, f"mutation {mutation.name}.when", mutation.target, mutation.when))
    return found


# The aiadmit extensions docs/policy-language.md names (not portable to a ValidatingAdmissionPolicy).
SPELLINGS = ("sum", "join", "lowerAscii")  # as global functions: aiadmit's spellings of Kubernetes' methods


def extension_uses(source: str, policy, level: str) -> frozenset:
    """The aiadmit extensions `source` uses, found by aiadmit's own checker (so types are known where the checker
    knows them): extension functions, the global-function spellings, and operators on quantities."""
    from webhook.cel.checker import DYN, Checker, Struct
    from webhook.cel.environment import params_type
    from webhook.cel.library import FUNCTIONS
    from webhook.cel.parser import parse_with_positions
    from webhook.language.declarations import for_level

    uses: set = set()

    class Recorder(Checker):
        def _binary(self, node, scope):
            kind = super()._binary(node, scope)
            _, op, left, right = node
            kinds = (self.check(left, scope), self.check(right, scope))
            if "quantity" in kinds and op != "in":
                uses.add(f"quantity operator {op}")
            return kind

        def _call(self, node, scope):
            _, name, target, args = node
            function = FUNCTIONS.get(name)
            if function is not None and function.origin == "aiadmit":
                uses.add(name)
            if target is None and name in SPELLINGS:
                uses.add(f"{name}(...) spelling")
            if target is None and name == "quantity" and len(args) == 1 and \
                    self.check(args[0], scope) not in ("string", DYN):
                uses.add("quantity() of a number")
            return super()._call(node, scope)

    declarations = dict(for_level(level, Struct("variables", {n: e.type for n, e in policy.named.items()})
                                  if policy.named else None))
    declarations["params"] = params_type(policy.params)
    tree, positions = parse_with_positions(source)
    recorder = Recorder(positions, declarations, FUNCTIONS)
    recorder.type = recorder.check(tree)
    return frozenset(uses)


def aiadmit_names() -> list[str]:
    """aiadmit's own variables (declared dyn in Kubernetes' environment, as the portability claim allows)."""
    from webhook.language.declarations import CONTAINER

    vap = {"object", "oldObject", "request", "namespaceObject", "params", "variables"}
    return sorted(set(CONTAINER) - vap)
