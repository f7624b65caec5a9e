"""Soak: the webhook under a steady rate for minutes, in one-minute windows: errors, p99 drift, worker RSS drift.

    python3 bench/soak.py [--minutes 10] [--rate 200] [--window 60] [--port 18543]

Starts `aiadmit serve --dev` (loopback, its dev certificates, 2 workers, no cluster) from this checkout and drives
it with bench/load.py at `--rate` reviews/s of examples/pytorchjob-gpu.json, one window after another, bounded in
time. Each window prints its p99 and the workers' RSS; the summary compares the last window with the first
(the issue's bar: 0 errors, RSS flat within 10 %, p99 drift within 20 %) and exits 1 when a bar is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from served import load, serve, stop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--window", type=float, default=60.0, help="seconds per measured window")
    parser.add_argument("--port", type=int, default=18543)
    args = parser.parse_args()
    server = serve(args.port)
    rows = []
    try:
        started = time.monotonic()
        while time.monotonic() - started < args.minutes * 60:
            result = load(args.port, "rate", args.window, args.rate, server_pid=server.pid)
            rss = result.get("worker_rss_mib") or {}
            row = {"minute": round((time.monotonic() - started) / 60, 1), "ok": result.get("ok"),
                   "errors": result.get("errors"), "p99_ms": result.get("p99_ms"),
                   "rss_mib": round(sum(rss.values()), 1) if rss else None}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        stop(server)
    if len(rows) < 2:
        print("too short to compare", file=sys.stderr)
        return 1
    first, last = rows[0], rows[-1]
    errors = sum(r["errors"] or 0 for r in rows if r["errors"] != -1) + sum(1 for r in rows if r["errors"] == -1)
    rss_drift = (last["rss_mib"] / first["rss_mib"] - 1) if first["rss_mib"] else float("nan")
    p99_drift = (last["p99_ms"] / first["p99_ms"] - 1) if first["p99_ms"] else float("nan")
    summary = {"windows": len(rows), "reviews": sum(r["ok"] or 0 for r in rows), "errors": errors,
               "rss_first_mib": first["rss_mib"], "rss_last_mib": last["rss_mib"], "rss_drift": round(rss_drift, 3),
               "p99_first_ms": first["p99_ms"], "p99_last_ms": last["p99_ms"], "p99_drift": round(p99_drift, 3),
               "p99_max_ms": max(r["p99_ms"] or 0 for r in rows)}
    print(json.dumps(summary))
    held = errors == 0 and abs(rss_drift) <= 0.10 and p99_drift <= 0.20
    print("soak held" if held else "soak missed a bar (0 errors, RSS within 10 %, p99 drift within 20 %)")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
