"""The long fuzz run: thousands of hostile AdmissionReviews and manifests, fresh seeds, figures for docs/reliability.md.

The unit suite (tests/test_fuzz.py) checks a few hundred seeded cases on every run; this checks many more with the
same strategies (tests/fuzzshapes.py) and the same properties (no 5xx, the uid always echoed; no traceback from
loading and evaluating a manifest), and counts what the answers were, so that a run that only ever exercised the
first 400 is visible as such. In process: the Flask test client of the real app, the real engine and built-in
policies; no network. Bounded: each property stops at --examples or --seconds, whichever comes first.

    python3 bench/fuzz.py --examples 3000 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

import fuzzshapes  # noqa: E402
import test_fuzz  # noqa: E402
from webhook.app.server import EngineSource, Settings, create_app  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=3000, help="cases per property (default 3000)")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="hypothesis seed (default: the clock)")
    parser.add_argument("--seconds", type=float, default=600.0, help="time limit per property (default 600)")
    args = parser.parse_args()
    engine = test_fuzz.engine()
    client = create_app(EngineSource(engine), settings=Settings(budget_seconds=5)).test_client()
    chosen = settings(max_examples=args.examples, deadline=None, database=None, derandomize=False,
                      suppress_health_check=list(HealthCheck))
    figures: dict = {"seed": args.seed, "examples": args.examples}
    failures: list[str] = []

    for name, strategy, check in (
            ("validate", fuzzshapes.reviews(), lambda review: _review(client, review, "/validate")),
            ("mutate", fuzzshapes.reviews(), lambda review: _review(client, review, "/mutate")),
            ("manifests", fuzzshapes.manifests(), _manifest)):
        counts: collections.Counter = collections.Counter()
        stop_at = time.monotonic() + args.seconds

        @seed(args.seed)
        @chosen
        @given(case=strategy)
        def run(case):
            if time.monotonic() > stop_at:  # past --seconds: drawn, not checked (an exception would be a failure)
                counts["not run (past --seconds)"] += 1
                return
            counts["cases"] += 1
            outcome = check(case)
            if outcome:
                counts[outcome] += 1

        started = time.monotonic()
        try:
            run()
        except Exception as exc:  # the property failed: hypothesis has shrunk and printed the case
            for sub in getattr(exc, "exceptions", [exc]):
                where = "".join(traceback.format_exception(sub)[-3:])
                failures.append(f"{name}: {type(sub).__name__}: {str(sub)[:1000]}\n{where[-1500:]}")
        counts["seconds"] = round(time.monotonic() - started, 1)
        figures[name] = dict(counts)
        print(f"{name}: {dict(counts)}", flush=True)
    figures["failures"] = failures
    print(json.dumps(figures, indent=1))
    return 1 if failures else 0


def _review(client, review: dict, path: str) -> str:
    """The property of tests/test_fuzz.py, and what the answer was (HTTP status, allowed, status code)."""
    test_fuzz.check_review(client, review, path)
    answer = client.post(path, data=fuzzshapes.review_body(review), content_type="application/json", buffered=True)
    if answer.status_code != 200:
        return f"http {answer.status_code}"
    response = answer.get_json()["response"]
    if response["allowed"]:
        return "allowed (patched)" if "patch" in response else "allowed"
    return f"denied {response['status']['code']}"


def _manifest(text: str) -> str:
    """The property of tests/test_fuzz.py, and what came of the text."""
    test_fuzz.check_manifest(text)
    loaded = test_fuzz.load_text(text, "fuzz.yaml")
    if loaded.errors:
        return "YAML error reported"
    errors = sum(bool(test_fuzz.engine().evaluate(r).errors) for r in loaded.resources)
    if errors:
        return "object error reported"
    return "evaluated" if loaded.resources else "no Kubernetes object"


if __name__ == "__main__":
    sys.exit(main())
