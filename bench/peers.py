"""Start-up and corpus cost of aiadmit beside the peers that install here, in one run, interleaved.

What installs from this workplace's registries: Checkov (PyPI, in its own virtualenv), gator (Gatekeeper's
CLI, a Go module: `go install github.com/open-policy-agent/gatekeeper/v3/cmd/gator@v3.23.1`), and, built here from
their pinned sources by this script (`--build-peers`, once, into ~/.cache/aiadmit-peers/bin), kube-linter v0.8.3 and
kube-score v1.20.0. kube-linter's module path (golang.stackrox.io/kube-linter) is refused by the Go module proxy
(403), but the proxy serves the same tagged source under its GitHub path, github.com/stackrox/kube-linter@v0.8.3;
since that go.mod names the other path, `go install` of it fails, so the source is unpacked and built in place
(`go build ./cmd/kube-linter`), its dependencies from the proxy. A peer that cannot be built is skipped with the
reason printed. Polaris is not built (its module host is not reachable from here), nor is Kyverno's CLI by default
(a long build; pass --kyverno PATH if you have one). Each tool runs its own default checks, so the rows compare the cost
of a run as CI and pre-commit pay it, not equal work: gator has no default policies, so it gets one
ConstraintTemplate written for this bench (containers must request memory), the least it can be asked to do, and
the Kyverno CLI (no default policies either) the same rule as one ClusterPolicy. The Kyverno CLI runs on the one
Pod only: given the corpus it reads no sub-directories of a --resource directory (0 resources), a document that is
not a Kubernetes object (the corpus's MIG configs) fails its run, and two objects of one name in different files
make v1.19.1 panic ("services \"llm-service\" already exists", from its fake client).

Two measurements, each tool in turn, rounds interleaved (this machine is shared and noisy; best of N counts):
- one Pod: a single small GPU Pod manifest, the pre-commit case (a handful of files per run); the CPU time
  (user + system) of the child process, and its wall time. `python3 -c pass` is measured beside it: the floor
  of any Python tool.
- the corpus: ../shared/corpus without `_unparseable/` (when present), once per round, and its tenfold copy
  (the issue's "corpus x10", 1,790 objects): aiadmit with `-j 1` (one core: CPU per object, comparable with the
  Go tools' CPU over all their threads) and with its default `-j`.

    python3 bench/peers.py [--rounds 5] [--build-peers] [--checkov /tmp/checkov-venv/bin/checkov] [--gator PATH]
                           [--kyverno PATH] [--corpus DIR | --no-corpus] [--only-targets "one Pod,corpus x10"]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.normpath(os.path.join(ROOT, "..", "shared", "corpus"))

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: gpu-pod, namespace: ml}
spec:
  containers:
    - name: main
      image: registry.example/serve:v1
      resources: {limits: {nvidia.com/gpu: "1"}}
"""

TEMPLATE = """\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8srequiredmemory}
spec:
  crd:
    spec:
      names: {kind: K8sRequiredMemory}
  targets:
    - target: admission.k8s.gatekeeper.sh
      rego: |
        package k8srequiredmemory
        violation[{"msg": msg}] {
          container := input.review.object.spec.containers[_]
          not container.resources.requests.memory
          msg := sprintf("container %v requests no memory", [container.name])
        }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredMemory
metadata: {name: required-memory}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
"""

KYVERNO_POLICY = """\
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-memory-requests}
spec:
  validationFailureAction: Audit
  rules:
    - name: memory-requested
      match:
        any:
          - resources: {kinds: [Pod]}
      validate:
        message: containers must request memory
        pattern:
          spec:
            containers:
              - resources: {requests: {memory: "?*"}}
"""


def run(command: list[str], env: dict) -> tuple[float, float, int]:
    """(wall seconds, child CPU seconds, exit code) of one cold process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=900)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


PEERS = os.path.expanduser("~/.cache/aiadmit-peers")
KUBE_LINTER = ("github.com/stackrox/kube-linter", "v0.8.3", "./cmd/kube-linter",
               "-X golang.stackrox.io/kube-linter/internal/version.version=v0.8.3")
KUBE_SCORE = ("github.com/zegl/kube-score", "v1.20.0", "./cmd/kube-score",
              "-X main.version=v1.20.0")


def build_go_peer(name: str, spec: tuple[str, str, str, str], log) -> tuple[Optional[str], str]:
    """(the binary, "") of a peer built from its pinned source, or (None, why it could not be built).

    The source comes from the Go module proxy under `module@version` (`go mod download`), is copied out of the
    read-only module cache and built in place with `-trimpath`: the module path its go.mod declares need not be
    the one the proxy serves it under (kube-linter's is not)."""
    module, tag, package, ldflags = spec
    binary = os.path.join(PEERS, "bin", f"{name}-{tag}")
    if os.access(binary, os.X_OK):
        return binary, ""
    if shutil.which("go") is None:
        return None, "no Go toolchain on PATH"
    try:
        done = subprocess.run(["go", "mod", "download", "-json", f"{module}@{tag}"], capture_output=True, text=True,
                              timeout=600, cwd=tempfile.gettempdir(), env=dict(os.environ, GO111MODULE="on"))
        info = json.loads(done.stdout or "{}")
        if "Error" in info or not info.get("Dir"):
            return None, f"go mod download {module}@{tag}: {info.get('Error') or done.stderr.strip()}"
        source = os.path.join(PEERS, "src", f"{name}-{tag}")
        if not os.path.isdir(source):
            shutil.copytree(info["Dir"], source + ".part")
            subprocess.run(["chmod", "-R", "u+w", source + ".part"], check=True)
            os.replace(source + ".part", source)
        os.makedirs(os.path.dirname(binary), exist_ok=True)
        done = subprocess.run(["go", "build", "-trimpath", "-ldflags", f"-s -w {ldflags}", "-o", binary + ".part",
                               package], cwd=source, capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return None, f"{name}: {exc}"
    if done.returncode != 0:
        return None, f"go build {package} of {module}@{tag}: {done.stderr.strip()[-500:]}"
    os.replace(binary + ".part", binary)
    print(f"built {binary}", file=log)
    return binary, ""


def write_pod(into: str) -> str:
    """POD as a file in `into`: the one-file input every start-up bench uses."""
    path = os.path.join(into, "pod.yaml")
    with open(path, "w") as handle:
        handle.write(POD)
    return path


def copy_corpus(corpus: str, into: str) -> str:
    """The corpus without `_unparseable/` (its one file that is not YAML on purpose), copied into `into`."""
    target = os.path.join(into, "corpus")
    shutil.copytree(corpus, target, ignore=shutil.ignore_patterns("_unparseable"))
    return target


def tenfold(corpus: str, into: str) -> str:
    """The corpus copied ten times (copy0 ... copy9), as the issue measured it."""
    target = os.path.join(into, "tenfold")
    for index in range(10):
        shutil.copytree(corpus, os.path.join(target, f"copy{index}"))
    return target


def version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except OSError:
        return "?"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"


def manifest_files(directory: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(directory) for f in fs if f.endswith((".yaml", ".yml")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--checkov", default="/tmp/checkov-venv/bin/checkov")
    parser.add_argument("--gator", default=os.path.expanduser("~/.cache/aiadmit-peers/bin/gator"))
    parser.add_argument("--kyverno", default="")
    parser.add_argument("--gator-version", default="", help="what to print for gator (`go install` leaves it unset)")
    parser.add_argument("--kyverno-version", default="", help="what to print for the Kyverno CLI")
    parser.add_argument("--corpus", default=CORPUS, help=f"the corpus directory (default {CORPUS})")
    parser.add_argument("--no-corpus", action="store_true")
    parser.add_argument("--build-peers", action="store_true",
                        help="build kube-linter and kube-score from their pinned sources when not built yet")
    parser.add_argument("--only-targets", default="", help="comma-separated: one Pod, corpus, corpus x10")
    args = parser.parse_args()

    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed tools run: bytecode cache allowed
    scratch = tempfile.mkdtemp(prefix="aiadmit-peers-")
    try:
        pod = write_pod(scratch)
        policy_dir = os.path.join(scratch, "gator")
        os.mkdir(policy_dir)
        with open(os.path.join(policy_dir, "template.yaml"), "w") as handle:
            handle.write(TEMPLATE)
        kyverno_policy = os.path.join(scratch, "kyverno-policy.yaml")
        with open(kyverno_policy, "w") as handle:
            handle.write(KYVERNO_POLICY)
        corpus = None
        if not args.no_corpus and os.path.isdir(args.corpus):
            corpus = copy_corpus(args.corpus, scratch)
        skipped = []
        go_peers = {}
        for name, spec in (("kube-linter", KUBE_LINTER), ("kube-score", KUBE_SCORE)):
            binary = os.path.join(PEERS, "bin", f"{name}-{spec[1]}")
            if args.build_peers:
                binary, why = build_go_peer(name, spec, sys.stderr)
            elif not os.access(binary, os.X_OK):
                binary, why = None, "not built (pass --build-peers)"
            if binary:
                go_peers[name] = (binary, spec[1])
            else:
                skipped.append(f"{name} {spec[1]}: {why}")

        tools: list[tuple[str, str, callable]] = [
            ("python3 -c pass", sys.version.split()[0], lambda target: [sys.executable, "-c", "pass"]),
            ("aiadmit audit", version([sys.executable, "-m", "webhook", "--version"]),
             lambda target: [sys.executable, "-m", "webhook", "audit", "-j", "1", target]),
            ("aiadmit audit, default -j", version([sys.executable, "-m", "webhook", "--version"]),
             lambda target: [sys.executable, "-m", "webhook", "audit", target]),
            # A first run on a fresh machine: no compiled programs on disk yet (webhook/app/diskcache.py).
            ("aiadmit audit, AIADMIT_NO_CACHE=1", version([sys.executable, "-m", "webhook", "--version"]),
             lambda target: ["env", "AIADMIT_NO_CACHE=1", sys.executable, "-m", "webhook", "audit", "-j", "1",
                             target]),
        ]
        if os.access(args.checkov, os.X_OK):
            tools.append(("checkov --framework kubernetes", version([args.checkov, "--version"]),
                          lambda target: [args.checkov, "--framework", "kubernetes", "--quiet", "--compact",
                                          "-o", "json", "-d" if os.path.isdir(target) else "-f", target]))
        if os.access(args.gator, os.X_OK):
            tools.append(("gator test (1 template)", args.gator_version or version([args.gator, "--version"]),
                          lambda target: [args.gator, "test", "-f", policy_dir, "-f", target]))
        if "kube-linter" in go_peers:  # its 19 default checks, built-in kinds only
            binary, tag = go_peers["kube-linter"]
            tools.append(("kube-linter lint", tag, lambda target, binary=binary: [binary, "lint", target]))
        if "kube-score" in go_peers:  # reads files, not directories
            binary, tag = go_peers["kube-score"]
            tools.append(("kube-score score", tag, lambda target, binary=binary: [binary, "score", *(
                manifest_files(target) if os.path.isdir(target) else [target])]))
        if args.kyverno and os.access(args.kyverno, os.X_OK):
            tools.append(("kyverno apply (1 policy)", args.kyverno_version or version([args.kyverno, "version"]),
                          lambda target: [args.kyverno, "apply", kyverno_policy, "--resource", target]))

        targets = [("one Pod", pod)]
        if corpus:
            targets += [("corpus", corpus), ("corpus x10", tenfold(corpus, scratch))]
        if args.only_targets:
            wanted = {name.strip() for name in args.only_targets.split(",")}
            targets = [(label, target) for label, target in targets if label in wanted]
        samples: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        for round_index in range(args.rounds):
            for label, target in targets:
                if label.startswith("corpus") and round_index >= min(args.rounds, 3) and not args.only_targets:
                    continue  # three corpus rounds are enough; Checkov takes tens of seconds each
                for name, _, command in tools:
                    if label.startswith("corpus") and name.startswith(("python3", "kyverno")):
                        continue  # Kyverno: see the module docstring
                    if label == "corpus x10" and name.startswith("checkov"):
                        continue  # minutes per run
                    if label == "one Pod" and name.endswith("default -j"):
                        continue  # one file never forks
                    wall, cpu, code = run(command(target), env)
                    samples.setdefault((label, name), []).append((wall, cpu, code))
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} rounds, median and best CPU; "
              f"load average {os.getloadavg()[0]:.1f}")
        print("| input | tool | version | CPU s median (user+sys) | CPU s best | wall s median | exit |")
        print("|---|---|---|---:|---:|---:|---|")
        for label, _ in targets:
            for name, tool_version, _ in tools:
                if (label, name) in samples:
                    runs = samples[(label, name)]
                    cpu = statistics.median(run[1] for run in runs)
                    wall = statistics.median(run[0] for run in runs)
                    codes = sorted({run[2] for run in runs})
                    print(f"| {label} | {name} | {tool_version} | {cpu:.3f} | {min(run[1] for run in runs):.3f} | "
                          f"{wall:.3f} | {','.join(map(str, codes))} |")
        for line in skipped:
            print(f"skipped: {line}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
