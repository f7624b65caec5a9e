"""Where one audit run's time goes: imports, loading the bundle, the parallel load+evaluate, each report format.

    python3 bench/audit_phases.py DIR [--jobs 2] [--formats json,text,sarif,junit,policyreport]

In one process, as `aiadmit audit` runs (collector frozen, forked workers), with
`time.perf_counter` around each phase; each worker prints the time of each
slice of files it took (the first slice also compiles the CEL programs it meets).
bench/audit.py builds a suitable DIR (the corpus repeated) and measures whole runs.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from functools import partial

START = time.perf_counter()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from webhook.app import audit
from webhook.app import parallel as fileaudit  # noqa: E402
from webhook.app import diskcache  # noqa: E402
from webhook.engine.core import Engine  # noqa: E402
from webhook.outputs.reports import fragment, render  # noqa: E402


_WORK = fileaudit._work


def timed_work(bounds):
    """A worker's slice, timed (module level: the pool pickles the function by name)."""
    began = time.perf_counter()
    out = _WORK(bounds)
    print(f"  worker {os.getpid()} files {bounds[0]}-{bounds[1]} {time.perf_counter() - began:.3f} s", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--formats", default="json,text,sarif,junit,policyreport")
    args = parser.parse_args()
    print(f"imports {time.perf_counter() - START:.3f} s")
    started = time.perf_counter()
    directory = diskcache.default_directory()  # as the command line does (AIADMIT_NO_CACHE=1: without)
    engine = Engine.load(cache=diskcache.DiskCache(directory) if directory else None)
    print(f"bundle loaded {time.perf_counter() - started:.3f} s")

    fork_map = fileaudit.fork_map

    def timed_fork_map(*a, **k):
        print(f"  before forking (read, scan, facts) {time.perf_counter() - started:.3f} s")
        began = time.perf_counter()
        out = fork_map(*a, **k)
        print(f"  workers {time.perf_counter() - began:.3f} s")
        return out

    fileaudit._work, fileaudit.fork_map = timed_work, timed_fork_map
    gc.disable()  # as the command does for a file audit
    started = time.perf_counter()
    for name in args.formats.split(","):
        started = time.perf_counter()
        # as the command runs it: each object's part of the report rendered by the worker that evaluated it
        prepare = partial(fragment, name, engine=engine, now=0.0)
        result = audit.audit_paths(engine, args.paths, jobs=args.jobs, one_shot=True, prepare=prepare)
        print(f"{name}: audit_paths {time.perf_counter() - started:.3f} s: {len(result.evaluations)} objects, "
              f"{len(result.findings)} findings")
        began = time.perf_counter()
        render(name, result, engine, fragments=result.prepared, now=0.0)
        print(f"{name}: render {time.perf_counter() - began:.3f} s")


if __name__ == "__main__":
    main()
