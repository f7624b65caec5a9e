"""`Engine.load()` of the built-in bundle: CPU time, median of many loads, for several revisions in the same run.

    python3 bench/bundle_load.py [--loads 30] [--rounds 3] [REV ...]     # default: HEAD and the working tree

Each revision (a git revision, extracted with `git archive` into a temporary directory, or `.` for the working
tree) runs in its own interpreter, rounds interleaved, so the machine's noise falls on all alike. One load is the
config, every policy document's schema check and every CEL expression's check and cost estimate; whatever the
bundle's record (policies/checked.json) answers is not run. The first load of each interpreter (imports, the
record read) is not counted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = """
import statistics, sys, time
from webhook.engine.core import Engine
Engine.load()
samples = []
for _ in range({loads}):
    start = time.process_time()
    Engine.load()
    samples.append(time.process_time() - start)
print(1e3 * statistics.median(samples))
"""


def tree(revision: str, into: str) -> str:
    if revision == ".":
        return REPO
    directory = os.path.join(into, revision.replace("/", "_"))
    os.makedirs(directory)
    archive = subprocess.run(["git", "archive", revision], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", directory], input=archive, check=True)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="*", default=["HEAD", "."])
    parser.add_argument("--loads", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        trees = {revision: tree(revision, scratch) for revision in args.revisions}
        found: dict[str, list[float]] = {revision: [] for revision in args.revisions}
        for _ in range(args.rounds):
            for revision, directory in trees.items():
                env = dict(os.environ, PYTHONPATH=directory, AIADMIT_NO_CACHE="1")
                done = subprocess.run([sys.executable, "-c", PROBE.format(loads=args.loads)], cwd=directory,
                                      env=env, capture_output=True, text=True, timeout=600)
                if done.returncode:
                    raise SystemExit(f"{revision}: {done.stderr[-2000:]}")
                found[revision].append(float(done.stdout.strip().splitlines()[-1]))
    for revision, medians in found.items():
        print(f"{revision:<12} Engine.load CPU {statistics.median(medians):6.1f} ms (median of {args.rounds} rounds "
              f"of {args.loads} loads: {', '.join(f'{m:.1f}' for m in medians)})")


if __name__ == "__main__":
    main()
