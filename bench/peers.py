"""Start-up and corpus cost of aiadmit beside the peers that install here, in one run, interleaved.

What installs from this workplace's registries: Checkov (PyPI, in its own virtualenv) and gator (Gatekeeper's
CLI, a Go module: `go install github.com/open-policy-agent/gatekeeper/v3/cmd/gator@v3.23.1`). kube-linter and
Polaris do not (their Go module hosts are not reachable from here), nor is Kyverno's CLI built by default (a long
build; pass --kyverno PATH if you have one). Each tool runs its own default checks, so the rows compare the cost
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
- the corpus: ../shared/corpus without `_unparseable/` (when present), once per round.

    python3 bench/peers.py [--rounds 5] [--checkov /tmp/checkov-venv/bin/checkov] [--gator PATH] [--kyverno PATH]
                           [--corpus DIR | --no-corpus]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

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


def version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except OSError:
        return "?"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else "?"


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
    args = parser.parse_args()

    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed tools run: bytecode cache allowed
    scratch = tempfile.mkdtemp(prefix="aiadmit-peers-")
    try:
        pod = os.path.join(scratch, "pod.yaml")
        with open(pod, "w") as handle:
            handle.write(POD)
        policy_dir = os.path.join(scratch, "gator")
        os.mkdir(policy_dir)
        with open(os.path.join(policy_dir, "template.yaml"), "w") as handle:
            handle.write(TEMPLATE)
        kyverno_policy = os.path.join(scratch, "kyverno-policy.yaml")
        with open(kyverno_policy, "w") as handle:
            handle.write(KYVERNO_POLICY)
        corpus = None
        if not args.no_corpus and os.path.isdir(args.corpus):
            corpus = os.path.join(scratch, "corpus")
            shutil.copytree(args.corpus, corpus, ignore=shutil.ignore_patterns("_unparseable"))

        tools: list[tuple[str, str, callable]] = [
            ("python3 -c pass", sys.version.split()[0], lambda target: [sys.executable, "-c", "pass"]),
            ("aiadmit audit", version([sys.executable, "-m", "webhook", "--version"]),
             lambda target: [sys.executable, "-m", "webhook", "audit", "-j", "1", target]),
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
        if args.kyverno and os.access(args.kyverno, os.X_OK):
            tools.append(("kyverno apply (1 policy)", args.kyverno_version or version([args.kyverno, "version"]),
                          lambda target: [args.kyverno, "apply", kyverno_policy, "--resource", target]))

        targets = [("one Pod", pod)] + ([("corpus", corpus)] if corpus else [])
        best: dict[tuple[str, str], tuple[float, float, int]] = {}
        for round_index in range(args.rounds):
            for label, target in targets:
                if label == "corpus" and round_index >= min(args.rounds, 3):
                    continue  # three corpus rounds are enough; Checkov takes tens of seconds each
                for name, _, command in tools:
                    if label == "corpus" and name.startswith(("python3", "kyverno")):
                        continue  # Kyverno: see the module docstring
                    wall, cpu, code = run(command(target), env)
                    key = (label, name)
                    if key not in best or cpu < best[key][1]:
                        best[key] = (wall, cpu, code)
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} rounds, best CPU of each; "
              f"load average {os.getloadavg()[0]:.1f}")
        print("| input | tool | version | CPU s (user+sys) | wall s | exit |")
        print("|---|---|---|---|---|---|")
        for label, _ in targets:
            for name, tool_version, _ in tools:
                if (label, name) in best:
                    wall, cpu, code = best[(label, name)]
                    print(f"| {label} | {name} | {tool_version} | {cpu:.3f} | {wall:.3f} | {code} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
