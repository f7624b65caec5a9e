"""Instructions per `Engine.evaluate` of two revisions, counted by valgrind (callgrind): a figure the machine's load
does not move.

    python3 bench/engine_instructions.py BASE [NEW] [--evaluations 2000]

BASE and NEW are git revisions (NEW defaults to the work tree as it is); each is exported with `git archive` into a
scratch directory. For each of bench/engine.py's objects (GPU serving pod, GPU PyTorchJob, non-AI pod) and each
revision, one process loads the bundle and evaluates the object once (warm-up), then N more times; it runs twice
under `valgrind --tool=callgrind`, with N = 0 and N = --evaluations, and the difference of the two instruction
totals over N is the cost of one evaluation (loading and start-up cancel out). PYTHONHASHSEED is fixed, so the
same tree gives the same count. Prints one line per object: instructions per evaluation, base and new, and the
ratio new / base (below 1 is faster).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PROBE = r"""
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import webhook
import engine as bench
assert webhook.__file__.startswith(sys.argv[2]), webhook.__file__
from webhook.engine.core import Engine
from webhook.model.resource import Resource
engine = Engine.load()
resource = Resource(getattr(bench, sys.argv[3]))
engine.evaluate(resource)
for _ in range(int(sys.argv[4])):
    engine.evaluate(resource)
"""
OBJECTS = (("gpu-pod", "GPU_POD"), ("pytorchjob", "PYTORCH_JOB"), ("plain-pod", "PLAIN_POD"))


def export(revision: str, into: str) -> str:
    tree = os.path.join(into, revision.replace("/", "_"))
    os.makedirs(tree)
    archive = subprocess.run(["git", "-C", ROOT, "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
    return tree


def instructions(tree: str, name: str, evaluations: int, scratch: str) -> int:
    out = os.path.join(scratch, f"callgrind.{os.path.basename(tree)}.{name}.{evaluations}")
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", PROBE,
                    HERE, tree, name, str(evaluations)], check=True, capture_output=True, env=env, cwd=tree)
    with open(out, encoding="utf-8") as handle:
        totals = re.search(r"^totals:\s+(\d+)", handle.read(), re.M)
    return int(totals.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--evaluations", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aiadmit-instr-") as scratch:
        trees = {"base": export(args.base, scratch), "new": export(args.new, scratch) if args.new else ROOT}
        # Untimed: writes each tree's bytecode, which a fresh export lacks (a counted run would otherwise pay for
        # compiling the modules it imports first). Once per object: a module imported only where an object needs it
        # (a lazy import) would otherwise be compiled in that object's N = 0 run and not in its N run, and the
        # difference of the two would come out too small by the compiling's cost over N.
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for tree in trees.values():
            for _, name in OBJECTS:
                subprocess.run([sys.executable, "-c", PROBE, HERE, tree, name, "0"], check=True,
                               capture_output=True, env=env, cwd=tree)
        print(f"base {args.base}  new {args.new or 'work tree'}  evaluations {args.evaluations}  (instructions each)")
        for label, name in OBJECTS:
            per = {}
            for which in ("base", "new"):  # interleaved per object; the counts do not depend on the order
                counts = [instructions(trees[which], name, n, scratch) for n in (0, args.evaluations)]
                per[which] = (counts[1] - counts[0]) / args.evaluations
            print(f"{label:12} base {per['base']:12,.0f}  new {per['new']:12,.0f}  ratio {per['new'] / per['base']:.3f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
