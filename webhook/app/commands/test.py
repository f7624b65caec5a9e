"""`aiadmit test DIR...`: run PolicyTest cases (docs/policy-tests.md).

Exit codes as for audit: 0 every case passed, 1 a case failed, 2 a path that does not exist or a test file that
cannot be read (a typo in CI must not look like a failing policy, nor like a passing one).
"""

from __future__ import annotations

import os
import sys

from webhook.app.policytest import run_tests


def register(subparsers) -> None:
    parser = subparsers.add_parser("test", help="run policy test cases",
                                   description="Run PolicyTest documents found under the given paths.")
    parser.add_argument("paths", nargs="+", metavar="PATH")
    parser.add_argument("-v", "--verbose", action="store_true", help="list passing cases too")
    parser.set_defaults(func=run)


def run(args) -> int:
    missing = [path for path in args.paths if not os.path.exists(path)]
    if missing:
        for path in missing:
            print(f"error: {path}: no such file or directory", file=sys.stderr)
        return 2
    run_ = run_tests(args.paths)
    for error in run_.errors:
        print(f"ERROR {error}")
    for result in run_.results:
        if not result.ok:
            print(f"FAIL {result.name}: {result.detail}")
        elif args.verbose:
            print(f"ok   {result.name}")
    print(f"{run_.passed} passed, {run_.failed} failed")
    sys.stdout.flush()
    if run_.errors:
        return 2
    return 0 if run_.failed == 0 else 1
