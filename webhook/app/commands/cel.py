"""`aiadmit cel EXPR --object FILE [--policy FILE --rule NAME]`: evaluate one expression as a rule would see it.

For policy authors: the expression is checked with the declarations of its level (the rule's target, or
--level), with the policy's params when --policy is given, and run over the variables the engine binds for the
object (its first pod template and container, or the ones --template/--container name). Prints the value, or
the error with its column and a caret under the place. Exit codes: 0 a value, 1 an evaluation error, 2 a load
error (bad expression, object or policy).
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

from webhook.app.commands import add_engine_options, load_engine
from webhook.cel.environment import CelError, Expression, new_context
from webhook.engine.binding import bind_resource, enter
from webhook.inputs.sources import load_paths
from webhook.language.declarations import for_level


def register(subparsers) -> None:
    parser = subparsers.add_parser("cel", help="evaluate one CEL expression over an object, as a rule would",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("expression", metavar="EXPR", help="the CEL expression (as in a rule's `expression`)")
    parser.add_argument("--object", required=True, metavar="FILE", help="the Kubernetes object (YAML or JSON)")
    parser.add_argument("--policy", metavar="FILE", help="a policy file: its params and the rule's level")
    parser.add_argument("--rule", metavar="NAME", help="with --policy: the rule whose level and params apply")
    parser.add_argument("--level", choices=("object", "pod", "container"),
                        help="the level without --rule (default: container when the object has one, else object)")
    parser.add_argument("--template", metavar="NAME", help="the pod template to bind (default: the first)")
    parser.add_argument("--container", metavar="NAME", help="the container to bind (default: the first)")
    add_engine_options(parser)
    parser.set_defaults(func=run)


def _display(value: Any) -> str:
    try:
        return json.dumps(value, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def run(args) -> int:
    if args.policy:
        args.policies = [args.policy]
    engine = load_engine(args)
    if engine is None:
        return 2
    loaded = load_paths([args.object])
    for error in loaded.errors:
        print(f"error: {error.file}:{error.line}:{error.column}: {error.message}", file=sys.stderr)
    if loaded.errors or not loaded.resources:
        if not loaded.errors:
            print(f"error: {args.object}: no Kubernetes object found", file=sys.stderr)
        return 2
    resource = loaded.resources[0]
    params, level = None, args.level
    if args.policy:
        policy = engine.policies[0]
        params = policy.params
        if args.rule:
            rules = [rule for rule in policy.rules if rule.name == args.rule]
            if not rules:
                print(f"error: {args.policy}: no rule {args.rule!r} (rules: "
                      f"{', '.join(r.name for r in policy.rules)})", file=sys.stderr)
                return 2
            level = rules[0].target
        level = level or policy.target
    scope, _ = engine.scope(resource, None)
    templates = scope.workload.templates if scope.workload else []
    template = next((t for t in templates if args.template in (None, t.name)), None)
    container = None
    if template is not None:
        container = next((c for c in template.containers if args.container in (None, c.obj.get("name"))), None)
    level = level or ("container" if container is not None else "pod" if template is not None else "object")
    try:
        expression = Expression(args.expression, params, None, for_level(level))
    except CelError as exc:
        column = (exc.offset or 0) + 1
        print(f"<expression>:1:{column}: {exc.message}\n  {args.expression}\n  {' ' * (column - 1)}^",
              file=sys.stderr)
        return 2
    context = new_context()
    reader = SimpleNamespace(variables=expression.variables, requires=frozenset())
    bind_resource(context, scope, [reader], engine.config.classification)
    if level in ("pod", "container") and template is None:
        print(f"error: {args.object}: no pod template to bind at level {level}", file=sys.stderr)
        return 2
    if level == "container" and container is None:
        print(f"error: {args.object}: no container to bind", file=sys.stderr)
        return 2
    enter(context, scope, template if level != "object" else None, 0 if template else None,
          container if level == "container" else None, engine.config.classification)
    try:
        value = expression.run(context)
    except Exception as exc:  # noqa: BLE001 - any evaluation error is a CEL error, reported as such
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(_display(value))
    return 0
