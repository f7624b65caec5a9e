"""Audit throughput: `aiadmit audit` vs Checkov's kubernetes framework, same files, same run.

The shared corpus (without `_unparseable/`) is copied N times into a scratch
directory until it holds at least --documents Kubernetes objects; both tools
then audit that directory from a cold process (start-up included, as CI and
pre-commit pay it), each --repeat times, and the best wall time counts.
Checkov runs from its own virtualenv (--checkov, default
/tmp/checkov-venv/bin/checkov: `python3 -m venv /tmp/checkov-venv &&
/tmp/checkov-venv/bin/pip install checkov`), never from the product's.

Both run as installed tools do: with Python's bytecode cache allowed (this
machine sets PYTHONDONTWRITEBYTECODE, which pip-installed Checkov does not
feel, its .pyc files being written at install, but a source checkout does),
and aiadmit with its disk cache (webhook/app/diskcache.py) in a scratch directory
that the first run fills. One more row gives aiadmit without the disk cache
(AIADMIT_NO_CACHE=1), what a first run on a fresh machine costs.

    python3 bench/audit.py [--documents 5000] [--repeat 3] [--formats text,json,sarif,junit,policyreport]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from webhook.inputs.sources import load_paths  # noqa: E402

CORPUS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "corpus"))


def build_tree(target: str, documents: int) -> tuple[int, int]:
    """Copies of the corpus under `target` until it holds `documents` objects: (files, objects)."""
    sources = [name for name in sorted(os.listdir(CORPUS))
               if os.path.isdir(os.path.join(CORPUS, name)) and not name.startswith("_")]
    per_copy = len(load_paths([os.path.join(CORPUS, name) for name in sources]).resources)
    copies = -(-documents // per_copy)
    for index in range(copies):
        for name in sources:
            shutil.copytree(os.path.join(CORPUS, name), os.path.join(target, f"copy{index:03d}", name))
    loaded = load_paths([target])
    assert not loaded.errors, loaded.errors[:3]
    files = sum(len(f) for _, _, f in os.walk(target))
    return files, len(loaded.resources)


def timed(command: list[str], repeat: int, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    best, last = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        last = subprocess.run(command, capture_output=True, text=True, env=env)
        best = min(best, time.perf_counter() - started)
    return best, last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--checkov", default="/tmp/checkov-venv/bin/checkov")
    parser.add_argument("--formats", default="text,json,sarif,junit,policyreport")
    parser.add_argument("--checkov-repeat", type=int, default=1, help="Checkov takes minutes; once by default")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="aiadmit-bench-")
    try:
        files, objects = build_tree(os.path.join(scratch, "tree"), args.documents)
        print(f"input: {files} files, {objects} Kubernetes objects ({CORPUS} repeated)")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "AIADMIT_NO_CACHE")}
        env["AIADMIT_CACHE_DIR"] = os.path.join(scratch, "cache")
        rows = []
        for fmt in args.formats.split(","):
            seconds, run = timed([sys.executable, "-m", "webhook", "audit", "--format", fmt,
                                  os.path.join(scratch, "tree")], args.repeat, env)
            assert run.returncode in (0, 1), run.stderr[-2000:]
            rows.append((f"aiadmit audit --format {fmt}", seconds, objects / seconds))
        seconds, run = timed([sys.executable, "-m", "webhook", "audit", "--format", "json",
                              os.path.join(scratch, "tree")], args.repeat, dict(env, AIADMIT_NO_CACHE="1"))
        assert run.returncode in (0, 1), run.stderr[-2000:]
        rows.append(("aiadmit audit --format json, no disk cache", seconds, objects / seconds))
        if os.path.exists(args.checkov):
            version = subprocess.run([args.checkov, "--version"], capture_output=True, text=True).stdout.strip()
            seconds, run = timed([args.checkov, "-d", os.path.join(scratch, "tree"), "--framework", "kubernetes",
                                  "--quiet", "--compact", "-o", "json"], args.checkov_repeat, env)
            assert run.returncode in (0, 1), run.stderr[-2000:]
            rows.append((f"checkov {version} --framework kubernetes -o json", seconds, objects / seconds))
        else:
            print(f"checkov not found at {args.checkov}: only aiadmit measured")
        width = max(len(r[0]) for r in rows)
        print(f"{'command':<{width}}  {'wall s':>7}  {'objects/s':>9}")
        for name, seconds, rate in rows:
            print(f"{name:<{width}}  {seconds:>7.2f}  {rate:>9.0f}")
        if len(rows) > 1 and rows[-1][0].startswith("checkov"):
            ours = max(rate for name, _, rate in rows if name.startswith("aiadmit"))
            slowest = min(rate for name, _, rate in rows if name.startswith("aiadmit"))
            print(f"aiadmit / checkov: {slowest / rows[-1][2]:.1f}x to {ours / rows[-1][2]:.1f}x")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
