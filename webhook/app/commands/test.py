"""`aiadmit test DIR...`: run PolicyTest cases (docs/policy-tests.md); `aiadmit test --init POLICY`: scaffold them.

Exit codes as for audit: 0 every case passed, 1 a case failed, 2 a format error: a path that does not exist, a
test file that cannot be read or holds no PolicyTest, a case naming a policy or rule that is not loaded, an
`expect` that is not an outcome (a typo in a test must not look like a failing policy, nor like a passing one).
"""

from __future__ import annotations

import os
import sys

from webhook.app.testreport import FORMATS, as_json, diagnostic, junit, text


def register(subparsers) -> None:
    parser = subparsers.add_parser("test", help="run policy test cases",
                                   description="Run PolicyTest documents found under the given paths.")
    parser.add_argument("paths", nargs="*", metavar="PATH")
    parser.add_argument("--format", "-f", choices=FORMATS, default="text", help="report format (default text)")
    parser.add_argument("-v", "--verbose", action="store_true", help="text: list the idempotency checks too")
    parser.add_argument("-q", "--quiet", action="store_true", help="text: only failing cases and the counts")
    parser.add_argument("--init", metavar="POLICY", help="write a starting test for the policy file POLICY")
    parser.add_argument("--output", "-o", metavar="DIR",
                        help="with --init: where to write test.yaml and resources.yaml "
                             "(default: tests/<policy id> beside the policy file)")
    parser.set_defaults(func=run)


def _init(args) -> int:
    from webhook.app.testinit import InitError, scaffold
    from webhook.outputs.diagnostics import format_diagnostic, of_problem
    from webhook.language.config import ConfigError
    from webhook.language.policy import PolicyLoadError

    if not os.path.isfile(args.init):
        print(format_diagnostic(args.init, 0, 0, "error", "no such policy file"), file=sys.stderr)
        return 2
    try:
        import yaml

        with open(args.init, encoding="utf-8") as handle:
            policy_id = ((yaml.safe_load(handle) or {}).get("metadata") or {}).get("name") or "policy"
    except (yaml.YAMLError, AttributeError, OSError):
        policy_id = "policy"
    directory = args.output or os.path.join(os.path.dirname(args.init), "tests", str(policy_id))
    try:
        written, notes = scaffold(args.init, directory)
    except (PolicyLoadError, ConfigError) as exc:
        for problem in exc.problems:
            print(of_problem(problem), file=sys.stderr)
        return 2
    except InitError as exc:
        print(format_diagnostic(exc.file, 0, 0, "error", exc.message), file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:  # a directory that cannot be made or written
        print(format_diagnostic(args.init, 0, 0, "error", str(exc)), file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    for path, line, note in notes:  # the new test fails until the author edits what the TODO names
        print(format_diagnostic(path, line, 1, "warning", note), file=sys.stderr)
    print(f"run it: aiadmit test {directory}")
    return 0


def run(args) -> int:
    if args.init:
        return _init(args)
    if not args.paths:
        print("error: aiadmit test needs a PATH (or --init POLICY)", file=sys.stderr)
        return 2
    from webhook.app.policytest import run_tests

    missing = [path for path in args.paths if not os.path.exists(path)]
    if missing:
        for path in missing:
            print(f"{path}:0:0: error: no such file or directory", file=sys.stderr)
        return 2
    run_ = run_tests(args.paths)
    for error in run_.errors:
        print(diagnostic(error), file=sys.stderr)
    sys.stderr.flush()
    if args.format == "json":
        sys.stdout.write(as_json(run_))
    elif args.format == "junit":
        sys.stdout.write(junit(run_))
    else:
        sys.stdout.write(text(run_, quiet=args.quiet, verbose=args.verbose))
    sys.stdout.flush()
    if run_.errors:
        return 2
    return 0 if run_.failed == 0 and all(r.ok for r in run_.idempotency) else 1
