"""`aiadmit cel EXPR --object FILE [--policy FILE --rule NAME]`: evaluate one expression as a rule would see it.

For policy authors: the expression is checked with the declarations of its level (the rule's target, or
--level), with the policy's params and its named `variables` visible at that level when --policy is given, and
run over the variables the engine binds for the object (its first pod template and container, or the ones
--template/--container name), `variables.NAME` evaluated lazily as in a review: so a rule's expression copied from
the policy, or `variables.NAME` alone, gives what the engine computes. Prints the value, or the error with its
column and a caret under the place. Exit codes: 0 a value, 1 an evaluation error, 2 a load error (bad
expression, object or policy).
"""

from __future__ import annotations

import json
import re
import sys
from types import SimpleNamespace
from typing import Any

from webhook.app.commands import add_engine_options, load_engine
from webhook.cel.environment import CelError, Expression, new_context
from webhook.engine.binding import bind_resource, bind_variables, enter
from webhook.inputs.sources import load_paths
from webhook.k8s.versions import DEFAULT_PORTABILITY, SUPPORTED, version as kubernetes_version
from webhook.language.compiler import policy_expression
from webhook.language.declarations import for_level
from webhook.outputs.diagnostics import format_diagnostic, of_input_error


_NO_VARIABLE = re.compile(r"variables has no field '([A-Za-z_][A-Za-z0-9_]*)'")


def register(subparsers) -> None:
    parser = subparsers.add_parser("cel", help="evaluate one CEL expression over an object, as a rule would",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("expression", metavar="EXPR", help="the CEL expression (as in a rule's `expression`)")
    parser.add_argument("--object", required=True, metavar="FILE", help="the Kubernetes object (YAML or JSON)")
    parser.add_argument("--document", type=int, metavar="N",
                        help="the object is the Nth Kubernetes object of FILE (from 1); needed when it holds several, "
                             "unless --kind/--name select one")
    parser.add_argument("--kind", metavar="KIND", help="select the object of FILE by kind (with or without --name)")
    parser.add_argument("--name", metavar="NAME", help="select the object of FILE by name")
    parser.add_argument("--policy", metavar="FILE", help="a policy file: its params and the rule's level")
    parser.add_argument("--rule", metavar="NAME", help="with --policy: the rule whose level and params apply")
    parser.add_argument("--level", choices=("object", "pod", "container"),
                        help="the level without --rule (default: container when the object has one, else object)")
    parser.add_argument("--template", metavar="NAME", help="the pod template to bind (default: the first)")
    parser.add_argument("--container", metavar="NAME", help="the container to bind (default: the first)")
    parser.add_argument("--kubernetes-version", choices=[v.name for v in SUPPORTED], metavar="VERSION",
                        help="refuse what an API server of this version refuses, as a policy's kubernetesVersion "
                             f"does ({', '.join(v.name for v in SUPPORTED)}; default: the policy's, else "
                             f"{DEFAULT_PORTABILITY})")
    add_engine_options(parser)
    parser.set_defaults(func=run)


def _display(value: Any) -> str:
    try:
        return json.dumps(value, default=repr, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _located(source: str, offset: int, message: str) -> str:
    """`<expression>:line:col: error: message` (the one form of every diagnostic, docs/cli.md), the line as written
    and a caret under the place (a rule's expression copied from a YAML block may span lines)."""
    start = source.rfind("\n", 0, offset) + 1
    end = source.find("\n", offset)
    line, column = source.count("\n", 0, offset) + 1, offset - start + 1
    text = source[start:end if end >= 0 else len(source)]
    return f"{format_diagnostic('<expression>', line, column, 'error', message)}\n  {text}\n  {' ' * (column - 1)}^"


def _level_hint(policy: Any, level: str, message: str) -> str:
    """Why a variable the policy defines is not visible: it reads a deeper level than the one asked for."""
    found = _NO_VARIABLE.match(message)
    name = found.group(1) if found else None
    if policy is None or name not in policy.levels or policy.levels[name] == level:
        return ""
    return f"; variable {name!r} reads the {policy.levels[name]} level: not visible at level {level}"


def _chosen(args, resources: list) -> Any:
    """The object the options name; None after saying why (several objects and no choice is an error: binding the
    first one silently answered for an object the author did not mean)."""
    described = ", ".join(f"{n}: {r.describe()}" for n, r in enumerate(resources, 1))
    if args.document is not None:
        if not 1 <= args.document <= len(resources):
            print(f"{args.object}:0:0: error: --document {args.document}: the file holds {len(resources)} "
                  f"object(s) ({described})", file=sys.stderr)
            return None
        return resources[args.document - 1]
    if args.kind or args.name:
        found = [r for r in resources if args.kind in (None, r.kind) and args.name in (None, r.name)]
        if len(found) != 1:
            print(f"{args.object}:0:0: error: --kind/--name select {len(found)} objects, not one ({described})",
                  file=sys.stderr)
            return None
        return found[0]
    if len(resources) > 1:
        print(f"{args.object}:0:0: error: the file holds {len(resources)} objects ({described}): choose one with "
              f"--document N or --kind/--name", file=sys.stderr)
        return None
    return resources[0]


def run(args) -> int:
    if args.policy:
        args.policies = [args.policy]
    engine = load_engine(args)
    if engine is None:
        return 2
    loaded = load_paths([args.object])
    for error in loaded.errors:
        print(of_input_error(error), file=sys.stderr)
    if loaded.errors or not loaded.resources:
        if not loaded.errors:
            print(format_diagnostic(args.object, 0, 0, "error", "no Kubernetes object found"), file=sys.stderr)
        return 2
    resource = _chosen(args, loaded.resources)
    if resource is None:
        return 2
    policy, level, requires = None, args.level, frozenset()
    if args.policy:
        policy = engine.policies[0]
        requires = policy.requires  # the cluster facts its rules read, as the engine gathers them for the policy
        if args.rule:
            rules = [rule for rule in policy.rules if rule.name == args.rule]
            if not rules:
                print(format_diagnostic(args.policy, 0, 0, "error", f"no rule {args.rule!r} (rules: "
                                        f"{', '.join(r.name for r in policy.rules)})"), file=sys.stderr)
                return 2
            level = rules[0].target
        level = level or policy.target
    scope, chosen = engine.scope(resource, None)
    templates = scope.workload.templates if scope.workload else []
    template = next((t for t in templates if args.template in (None, t.name)), None)
    container = None
    if template is not None:
        container = next((c for c in template.containers if args.container in (None, c.obj.get("name"))), None)
    level = level or ("container" if container is not None else "pod" if template is not None else "object")
    portable = kubernetes_version(args.kubernetes_version) if args.kubernetes_version else None
    try:
        if policy is not None:
            expression, reads = policy_expression(policy, args.expression, level, engine.config.cel_limits, portable)
        else:
            expression = Expression(args.expression, None, None, for_level(level), engine.config.cel_limits,
                                    portable=portable or DEFAULT_PORTABILITY)
            reads = expression.variables
    except CelError as exc:
        print(_located(args.expression, exc.offset or 0, exc.message + _level_hint(policy, level, exc.message)),
              file=sys.stderr)
        return 2
    where = resource.origin.position("")  # the chosen object's own line, for what is said about it
    context = new_context()
    reader = SimpleNamespace(variables=reads, requires=requires)
    bind_resource(context, scope, [reader], engine.config.classification)
    if level in ("pod", "container") and template is None:
        print(format_diagnostic(args.object, *where, "error", f"no pod template to bind at level {level}"),
              file=sys.stderr)
        return 2
    if level == "container" and container is None:
        print(format_diagnostic(args.object, *where, "error", "no container to bind"), file=sys.stderr)
        return 2
    enter(context, scope, template if level != "object" else None, templates.index(template) if template else None,
          container if level == "container" else None, engine.config.classification)
    if policy is not None:
        bind_variables(context, policy)  # a fresh, lazy set for this binding, as the engine's
        # Evaluated anyway (the author asked), but said: a review would never run this policy's rules here.
        if policy not in chosen:
            print(format_diagnostic(args.object, *where, "warning", f"policy {policy.id} does not apply to this object "
                                    "(its match): a review never runs it here"), file=sys.stderr)
        elif level == "container" and not policy.takes(container):
            print(format_diagnostic(args.object, *where, "warning", f"policy {policy.id} does not check container "
                                    f"{container.name} ({container.section}): a review never runs its container "
                                    "rules on it"), file=sys.stderr)
    try:
        value = expression.run(context)
    except Exception as exc:  # noqa: BLE001 - any evaluation error is a CEL error, reported as such
        print(format_diagnostic("<expression>", 0, 0, "error", f"evaluation: {exc}"), file=sys.stderr)
        return 1
    print(_display(value))
    return 0
