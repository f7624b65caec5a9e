"""`aiadmit fix PATH...`: apply the bundle's mutations to manifests in place (what the mutating webhook adds).

The convention is ruff's and black's: `aiadmit fix` writes; `--diff` prints the
unified diff and writes nothing; `--check` writes nothing and only says which
files would change. YAML keeps its comments and indentation style, JSON stays
JSON; templates (`{{ }}`) are skipped with a note, never rewritten.

Exit codes: 0 nothing to do or every change written; 1 with --check or --diff
when something would change; 2 unreadable input or a document that could not be
rewritten faithfully (that file is left untouched). A mutation the engine
could not evaluate is a warning, as the webhook admits with a warning too.
"""

from __future__ import annotations

import sys

from webhook.outputs.diagnostics import of_input_error

from webhook.app.commands import add_engine_options
from webhook.app.commands import load_engine


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "fix", help="add what the mutating policies add (shm volume, priority class, ...) to manifests in place",
        description="Apply the policy bundle's mutations to YAML and JSON manifests, preserving comments, key "
                    "order, quoting, indentation and document separators. Only documents that change are "
                    "rewritten. Writes the files unless --diff or --check is given.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="file or directory (recursive)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    parser.add_argument("--diff", action="store_true",
                        help="write nothing; print a unified diff of each change; exit 1 if a file would change")
    parser.add_argument("--policy", action="append", metavar="ID", help="only these policies' mutations")
    parser.add_argument("--skip", action="append", metavar="ID", help="not these policies' mutations")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors (and diffs)")
    parser.add_argument("--assume-priority-classes", action="store_true",
                        help="write PriorityClass names the input does not define (the cluster has them, e.g. "
                             "manifests/components/priority-classes); without it they are left out, with a warning")
    add_engine_options(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    if "-" in args.paths:
        print("error: fix rewrites files in place; it cannot read stdin", file=sys.stderr)
        return 2
    engine = load_engine(args)
    if engine is None:
        return 2
    unknown = sorted((set(args.policy or []) | set(args.skip or [])) - set(engine.by_id))
    if unknown:
        print(f"error: unknown policy id(s): {', '.join(unknown)} (see `aiadmit policies`)", file=sys.stderr)
        return 2
    from webhook.outputs.fix import fix_paths  # ruamel.yaml: only the fixer needs it

    preview = args.check or args.diff
    results = fix_paths(engine, args.paths, write=not preview, policies=set(args.policy or []) or None,
                        skip=set(args.skip or []) or None, assume_priority_classes=args.assume_priority_classes)
    changed = errors = skipped = 0
    for result in results:
        skipped += bool(result.skipped)
        for note in result.skipped if not args.quiet else ():
            print(of_input_error(note, "warning").replace(": warning: ", ": warning: skipped ", 1), file=sys.stderr)
        for error in result.errors:
            print(of_input_error(error), file=sys.stderr)
        for warning in result.warnings:
            print(of_input_error(warning, "warning"), file=sys.stderr)
        errors += bool(result.errors)
        if not result.changed:
            continue
        changed += 1
        if args.diff:
            sys.stdout.write(result.diff())
        if not args.quiet:
            verb = "would fix" if preview else "fixed"
            for resource, operations in result.operations.items():
                policies = ", ".join(dict.fromkeys(policy for policy, _ in operations))
                print(f"{result.path}: {verb} {resource}: {len(operations)} addition(s) by {policies}",
                      file=sys.stderr)
    if not args.quiet:
        verb = "would be changed" if preview else "changed"
        note = f", {skipped} skipped" if skipped else ""
        print(f"{len(results)} files checked, {changed} {verb}{note}, {errors} with errors", file=sys.stderr)
    if errors:
        return 2
    return 1 if preview and changed else 0
