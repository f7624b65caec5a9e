"""Start-up cost of a one-file audit (the pre-commit case), beside `python3 -c pass` and a base revision, in one run.

    python3 bench/startup.py [BASE] [--rounds 30] [--importtime 15] [--no-cache]

Most pre-commit runs check a handful of files, so what a run costs is mostly start-up: importing the
package, loading the built-in bundle (answered by policies/checked.json and the disk cache when they
match), parsing one file, printing the report. Each round runs, in an order that rotates every round:

- `python3 -c pass` (the floor of any Python tool on this machine);
- `python3 -m webhook audit POD.yaml` of BASE (default 2c01026), unpacked with `git archive` into a
  scratch directory;
- the same command of this work tree.

POD.yaml is one 9-line GPU Pod manifest (bench/peers.py's). Each revision has its own disk cache
(`AIADMIT_CACHE_DIR` in the scratch directory), warmed, with the bytecode, by untimed runs first: the
warm case a developer's second commit pays (`--no-cache`: the first run on a machine, or a CI job without one). The figure is the CPU time of the child process
(user + system, from getrusage), median and best over the rounds, with the wall time beside it.
Before the timed rounds, the conditions that decide the figure are printed for each revision, from one run of the
same command in a probe process: whether the interpreter may write bytecode and how many of the modules it
imported from the tree were loaded from a `.pyc` (a fresh clone under PYTHONDONTWRITEBYTECODE=1, as this
environment sets, compiles every module in every run: about 0.8 s instead of 0.2 s, measured for issue 25), the
disk cache's directory and its hits and misses (a miss compiles a CEL program's Python), and the load average.
Then `-X importtime` of each revision: the modules with the largest own import time (the least of 5 runs).
The two revisions' outputs are compared byte for byte and the difference, if any, printed.
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
sys.path.insert(0, HERE)
from peers import POD  # noqa: E402  (the same one-Pod input as the peers' table)


def unpack(revision: str, into: str) -> str:
    """The tree of REVISION in a scratch directory, by `git archive` (no worktree metadata touched)."""
    target = os.path.join(into, revision.replace("/", "_"))
    os.mkdir(target)
    archive = subprocess.run(["git", "-C", ROOT, "archive", revision], capture_output=True, check=True, timeout=120)
    subprocess.run(["tar", "-x", "-C", target], input=archive.stdout, check=True, timeout=120)
    return target


def run(command: list[str], env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """(CPU seconds of the child, wall seconds, the run), in the directory of the tree it runs (`python3 -m`
    puts the current directory first on sys.path)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, timeout=120, cwd=env.get("PYTHONPATH") or None)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall, done


CONDITIONS_PROBE = r"""
import json, os, sys
sys.argv = ["aiadmit", *sys.argv[1:]]
tree = os.environ["PYTHONPATH"]
caches = []
from webhook.app import diskcache
if hasattr(diskcache, "DiskCache"):
    original = diskcache.DiskCache.__init__
    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        caches.append(self)
    diskcache.DiskCache.__init__ = init
from webhook.app import cli
try:
    cli.entry()
except SystemExit:
    pass
modules = [m for m in list(sys.modules.values()) if (getattr(m, "__file__", None) or "").startswith(tree)
           and m.__file__.endswith(".py")]
compiled = [m for m in modules if getattr(m, "__cached__", None) and os.path.exists(m.__cached__)]
print(json.dumps({"dont_write_bytecode": bool(sys.flags.dont_write_bytecode), "modules": len(modules),
                  "from_pyc": len(compiled), "cache_dir": caches[0].directory if caches else None,
                  "hits": sum(c.hits for c in caches), "misses": sum(c.misses for c in caches)}), file=sys.stderr)
"""


def conditions(command: list[str], env: dict) -> str:
    """What decides a one-file figure, from one probe run of COMMAND's audit: bytecode and the disk cache."""
    done = subprocess.run([command[0], "-c", CONDITIONS_PROBE, *command[3:]], env=env, capture_output=True, text=True,
                          timeout=120, cwd=env.get("PYTHONPATH") or None)
    try:
        found = json.loads(done.stderr.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"probe failed: {done.stderr[-500:]}"
    return (f"bytecode: PYTHONDONTWRITEBYTECODE {'set' if found['dont_write_bytecode'] else 'unset'}, "
            f"{found['from_pyc']} of {found['modules']} modules of the tree had a .pyc; disk cache "
            f"{found['cache_dir'] or 'off'}: {found['hits']} hits, {found['misses']} misses")


def importtime(command: list[str], env: dict, top: int, runs: int = 5) -> list[tuple[int, int, str]]:
    """The TOP modules by own (self) import time, microseconds, the least of RUNS runs: (self, cumulative, name)."""
    least: dict[str, tuple[int, int]] = {}
    for _ in range(runs):
        done = subprocess.run([command[0], "-X", "importtime", *command[1:]], env=env, capture_output=True,
                              text=True, timeout=120, cwd=env.get("PYTHONPATH") or None)
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, cumulative, name = line[len("import time:"):].split("|")
            name = name.strip()
            if name not in least or int(own) < least[name][0]:
                least[name] = (int(own), int(cumulative))
    return sorted(((own, cumulative, name) for name, (own, cumulative) in least.items()), reverse=True)[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", nargs="?", default="2c01026")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--importtime", type=int, default=15, help="how many modules to list per revision")
    parser.add_argument("--no-cache", action="store_true",
                        help="AIADMIT_NO_CACHE=1 for both revisions: a first run on a machine, a CI job without a cache")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="aiadmit-startup-")
    try:
        pod = os.path.join(scratch, "pod.yaml")
        with open(pod, "w") as handle:
            handle.write(POD)
        trees = {f"base {args.base}": unpack(args.base, scratch), "work tree": ROOT}
        commands: dict[str, tuple[list[str], dict]] = {}
        floor_env = dict(os.environ)
        floor_env.pop("PYTHONDONTWRITEBYTECODE", None)
        commands["python3 -c pass"] = ([sys.executable, "-c", "pass"], floor_env)
        for index, (label, tree) in enumerate(trees.items()):
            env = dict(floor_env, PYTHONPATH=tree, AIADMIT_CACHE_DIR=os.path.join(scratch, f"cache-{index}"))
            env.pop("AIADMIT_NO_CACHE", None)
            if args.no_cache:
                env["AIADMIT_NO_CACHE"] = "1"
            commands[f"audit, {label}"] = ([sys.executable, "-m", "webhook", "audit", pod], env)
        outputs = {}
        for name, (command, env) in commands.items():  # warm: bytecode, disk cache, page cache; untimed
            for _ in range(3):
                _, _, done = run(command, env)
            outputs[name] = done.stdout + done.stderr
            if b"Traceback" in done.stderr:
                print(f"{name}: {done.stderr.decode(errors='replace')[-2000:]}", file=sys.stderr)
                return 2
        facts = {name: conditions(*commands[name]) for name in commands if name.startswith("audit")}
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        names = list(commands)
        for round_number in range(args.rounds):
            shift = round_number % len(names)
            for name in names[shift:] + names[:shift]:
                command, env = commands[name]
                cpu, wall, _ = run(command, env)
                samples[name].append((cpu, wall))
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} interleaved rounds, "
              f"load average {os.getloadavg()[0]:.1f}, Python {sys.version.split()[0]}"
              f"{', AIADMIT_NO_CACHE=1' if args.no_cache else ', warm disk cache'}")
        print("| command | CPU s median | CPU s best | wall s median | wall s best |")
        print("|---|---:|---:|---:|---:|")
        for name in names:
            cpus = [cpu for cpu, _ in samples[name]]
            walls = [wall for _, wall in samples[name]]
            print(f"| {name} | {statistics.median(cpus):.3f} | {min(cpus):.3f} | "
                  f"{statistics.median(walls):.3f} | {min(walls):.3f} |")
        for name, found in facts.items():
            print(f"{name}: {found}")
        audits = [name for name in names if name.startswith("audit")]
        same = outputs[audits[0]] == outputs[audits[1]]
        print(f"\noutputs of the two revisions byte-identical: {same}")
        for name in audits:
            command, env = commands[name]
            print(f"\n`-X importtime`, {name}: own microseconds, cumulative, module (least of 5 runs)")
            for own, cumulative, module in importtime(command, env, args.importtime):
                print(f"  {own:>7} {cumulative:>8}  {module}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
