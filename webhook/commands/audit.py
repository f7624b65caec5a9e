"""`aiadmit audit PATH... | -`: check manifests with the same engine the webhook runs."""

from __future__ import annotations

import sys

from ..audit import audit_paths
from ..reports import FORMATS, render
from . import add_engine_options, load_engine


def register(subparsers) -> None:
    parser = subparsers.add_parser("audit", help="check manifests (files, directories, - for stdin)",
                                   description="Check Kubernetes manifests against the policy bundle.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="file, directory (recursive) or - for stdin")
    parser.add_argument("--format", "-f", choices=sorted(FORMATS), default="text")
    parser.add_argument("--fail-on", choices=("deny", "warn", "never"), default="deny",
                        help="lowest action that makes the exit code 1 (default deny)")
    parser.add_argument("--policy", action="append", metavar="ID", help="only these policies (repeatable)")
    parser.add_argument("--skip", action="append", metavar="ID", help="not these policies (repeatable)")
    add_engine_options(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    engine = load_engine(args)
    if engine is None:
        return 2
    unknown = sorted(set(args.policy or []) | set(args.skip or []) - set(engine.by_id))
    unknown = [u for u in unknown if u not in engine.by_id]
    if unknown:
        print(f"error: unknown policy id(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    result = audit_paths(engine, args.paths, policies=set(args.policy or []) or None,
                         skip=set(args.skip or []) or None)
    sys.stdout.write(render(args.format, result, engine))
    return result.exit_code(args.fail_on)
