"""`aiadmit policies [ID]`: list the loaded policies, or explain one."""

from __future__ import annotations

import sys
import textwrap

from . import add_engine_options, load_engine


def register(subparsers) -> None:
    parser = subparsers.add_parser("policies", help="list policies, or explain one")
    parser.add_argument("id", nargs="?", help="explain this policy")
    add_engine_options(parser)
    parser.set_defaults(func=run)


def explain(policy, action: str) -> str:
    match = policy.match
    applies = ", ".join(sorted(match.classes | match.any_classes)) or "-"
    lines = [f"{policy.id} [{action}]", f"  {policy.summary}", "", f"applies to: {applies}"
             + (f"; kinds {', '.join(sorted(match.kinds))}" if match.kinds else ""), f"target: {policy.target}", ""]
    lines += ["why:"] + [textwrap.indent(textwrap.fill(p, 100), "  ") for p in policy.why.split("\n\n")] + [""]
    lines += ["remediation:"] + [textwrap.indent(textwrap.fill(p, 100), "  ") for p in policy.remediation.split("\n\n")]
    if policy.params:
        lines += ["", "params:"] + [f"  {k}: {v}" for k, v in policy.params.items()]
    lines += ["", "rules:"] + [f"  {r.name}" + (f" [{r.action}]" if r.action else "") for r in policy.rules]
    if policy.mutations:
        lines += ["", "mutations:"] + [f"  {m.name}: {m.op} {m.path}" for m in policy.mutations]
    lines += ["", f"docs: {policy.docs}", f"source: {policy.source}"]
    return "\n".join(lines) + "\n"


def run(args) -> int:
    engine = load_engine(args)
    if engine is None:
        return 2
    if args.id:
        policy = engine.by_id.get(args.id)
        if policy is None:
            print(f"error: no policy {args.id!r}; known: {', '.join(sorted(engine.by_id))}", file=sys.stderr)
            return 2
        sys.stdout.write(explain(policy, engine._actions.get(policy.id, policy.action)))
        return 0
    width = max(len(p) for p in engine.by_id)
    for policy in sorted(engine.by_id.values(), key=lambda p: p.id):
        action = engine._actions.get(policy.id, "off")
        sys.stdout.write(f"{policy.id:<{width}}  {action:<5}  {policy.summary}\n")
    return 0
