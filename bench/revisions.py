"""Two revisions of aiadmit side by side, on the figures users see, interleaved in one run.

    python3 bench/revisions.py BASE [NEW] [--rounds 5] [--corpus DIR]

BASE and NEW are git revisions (NEW defaults to the work tree as it is). Each is
checked out into a scratch directory; then every round runs each figure once
per revision, alternating which goes first, so a noisy machine (this one swings
3x with load) hits both alike. Figures, each as the median over rounds of CPU
seconds (user + system of the processes it ran) and of wall seconds:

- engine: `Engine.evaluate` of bench/engine.py's GPU serving pod, GPU
  PyTorchJob and non-AI pod, evaluations per CPU second (one process);
- audit: `aiadmit audit -f json` (or `--format`) of the corpus, and of a 10x copy of it;
- pre-commit: `aiadmit audit` over 1,000 manifest files named on the command
  line, as the pre-commit hook runs it, with a warm disk cache.

The disk cache of each revision lives in its own scratch directory and is
warmed by one untimed run first. Prints one table; ratios are NEW / BASE
(above 1 is faster for rates, below 1 is faster for seconds).
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.normpath(os.path.join(ROOT, "..", "shared", "corpus"))

ENGINE_PROBE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import webhook  # the revision's own package, first: bench/engine.py puts the work tree at the head of sys.path
import engine as bench
assert webhook.__file__.startswith(sys.argv[2]), webhook.__file__
try:
    from webhook.engine.core import Engine
except ImportError:
    from webhook.engine import Engine
try:
    from webhook.model.resource import Resource
except ImportError:
    from webhook.resource import Resource
engine = Engine.load()
out = {}
for name, obj in (("gpu-pod", bench.GPU_POD), ("pytorchjob", bench.PYTORCH_JOB), ("plain-pod", bench.PLAIN_POD)):
    resource = Resource(obj)
    for _ in range(200):
        engine.evaluate(resource)
    count, started = 0, time.process_time()
    while time.process_time() - started < 1.0:
        for _ in range(100):
            engine.evaluate(resource)
        count += 100
    out[name] = count / (time.process_time() - started)
print(json.dumps(out))
"""


def checkout(revision: str, into: str) -> str:
    target = os.path.join(into, revision.replace("/", "_"))
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", target, revision], check=True)
    return target


def run(command: list[str], cwd: str, env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(CPU seconds of the children, wall seconds, the run)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, done


def build_inputs(corpus: str, scratch: str) -> dict[str, list[str]]:
    sources = [os.path.join(corpus, n) for n in sorted(os.listdir(corpus))
               if os.path.isdir(os.path.join(corpus, n)) and not n.startswith("_")]
    tenfold = os.path.join(scratch, "tenfold")
    for index in range(10):
        for source in sources:
            shutil.copytree(source, os.path.join(tenfold, f"copy{index}", os.path.basename(source)))
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(tenfold) for f in fs
                   if f.endswith((".yaml", ".yml", ".json")))
    return {"audit corpus": sources, "audit 10x corpus": [tenfold], "pre-commit 1,000 files": files[:1000]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--format", default="json", help="the audits' report format")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="aiadmit-revisions-")
    trees = {}
    try:
        trees["base"] = checkout(args.base, scratch)
        trees["new"] = checkout(args.new, scratch) if args.new else ROOT
        inputs = build_inputs(args.corpus, scratch)
        envs = {}
        for side, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=tree, AIADMIT_CACHE_DIR=os.path.join(scratch, f"cache-{side}"))
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed tools run: bytecode cached
            env.pop("AIADMIT_NO_CACHE", None)
            envs[side] = env
            for paths in inputs.values():  # warm the disk cache and the bytecode; untimed
                run([sys.executable, "-m", "webhook", "audit", "-f", args.format, *paths], tree, env)
        samples: dict[tuple[str, str], list] = {}
        for round_number in range(args.rounds):
            order = ("base", "new") if round_number % 2 == 0 else ("new", "base")
            for side in order:
                tree, env = trees[side], envs[side]
                _, _, probe = run([sys.executable, "-c", ENGINE_PROBE, HERE, tree], tree, env)
                if probe.returncode == 0:
                    for name, value in json.loads(probe.stdout.strip().splitlines()[-1]).items():
                        samples.setdefault((f"engine {name} (eval/CPU s)", side), []).append((value, 0.0))
                else:
                    print(probe.stderr[-2000:], file=sys.stderr)
                for figure, paths in inputs.items():
                    cpu, wall, done = run([sys.executable, "-m", "webhook", "audit", "-f", args.format, *paths], tree, env)
                    if done.returncode not in (0, 1, 2) or "Traceback" in done.stderr:
                        print(f"{side} {figure}: exit {done.returncode}\n{done.stderr[-2000:]}", file=sys.stderr)
                    samples.setdefault((f"{figure} (CPU s, wall s)", side), []).append((cpu, wall))
        print(f"base {args.base}  new {args.new or 'work tree'}  rounds {args.rounds}  format {args.format}  "
              f"(median; ratio new/base)")
        figures = sorted({figure for figure, _ in samples}, key=lambda f: (not f.startswith("engine"), f))
        for figure in figures:
            base = samples.get((figure, "base"), [])
            new = samples.get((figure, "new"), [])
            if not base or not new:
                continue
            b0, n0 = statistics.median(v[0] for v in base), statistics.median(v[0] for v in new)
            line = f"{figure:<44} base {b0:>10,.3f}  new {n0:>10,.3f}  ratio {n0 / b0:5.3f}"
            if not figure.startswith("engine"):
                b1, n1 = statistics.median(v[1] for v in base), statistics.median(v[1] for v in new)
                line += f"   wall base {b1:.3f} new {n1:.3f} ratio {n1 / b1:5.3f}"
            print(line)
    finally:
        for side, tree in trees.items():
            if tree != ROOT:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
