"""`aiadmit test DIR...`: run PolicyTest cases (docs/policy-tests.md)."""

from __future__ import annotations

import sys

from webhook.app.policytest import run_tests


def register(subparsers) -> None:
    parser = subparsers.add_parser("test", help="run policy test cases",
                                   description="Run PolicyTest documents found under the given paths.")
    parser.add_argument("paths", nargs="+", metavar="PATH")
    parser.add_argument("-v", "--verbose", action="store_true", help="list passing cases too")
    parser.set_defaults(func=run)


def run(args) -> int:
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
    return 0 if run_.failed == 0 else 1
