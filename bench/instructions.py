"""Instruction counts (valgrind's callgrind) of the audit figures, a base revision against the work tree.

    python3 bench/instructions.py [BASE] [--corpus DIR]

CPU seconds on a shared machine swing with the other work on it; the number of instructions a run executes does
not, so this is what decisions were taken on (issue 25). For BASE (default 5f975d5, unpacked with `git archive`)
and this work tree, each with its own disk cache and bytecode, warmed by one untimed run: the instructions of
`python3 -m webhook audit -j 1 CORPUSx10` (the corpus copied ten times, 1,790 objects) and of
`python3 -m webhook audit POD.yaml` (bench/peers.py's one Pod), and of `python3 -c pass` beside them.
Needs valgrind (Debian's package); about a minute per run of the tenfold corpus.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from peers import copy_corpus, tenfold, write_pod  # noqa: E402
from startup import unpack  # noqa: E402


def instructions(command: list[str], env: dict, cwd: str) -> int:
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=3600)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if not found:
        raise SystemExit(f"callgrind gave no count for {command}: {done.stderr[-1000:]}")
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", nargs="?", default="5f975d5")
    parser.add_argument("--corpus", default=os.path.normpath(os.path.join(ROOT, "..", "shared", "corpus")))
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)")
        return 0
    scratch = tempfile.mkdtemp(prefix="aiadmit-instructions-")
    try:
        pod = write_pod(scratch)
        ten = tenfold(copy_corpus(args.corpus, scratch), scratch)
        trees = {f"base {args.base}": unpack(args.base, scratch), "work tree": ROOT}
        floor = dict(os.environ)
        floor.pop("PYTHONDONTWRITEBYTECODE", None)
        print(f"python3 -c pass: {instructions([sys.executable, '-c', 'pass'], floor, scratch):,}")
        for index, (label, tree) in enumerate(trees.items()):
            env = dict(floor, PYTHONPATH=tree, AIADMIT_CACHE_DIR=os.path.join(scratch, f"cache-{index}"))
            env.pop("AIADMIT_NO_CACHE", None)
            for name, target in (("corpus x10, -j 1", ["-j", "1", ten]), ("one Pod", [pod])):
                command = [sys.executable, "-m", "webhook", "audit", *target]
                subprocess.run(command, env=env, cwd=tree, capture_output=True, timeout=600)  # warm
                print(f"{label}: audit {name}: {instructions(command, env, tree):,} instructions", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
