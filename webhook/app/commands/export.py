"""`aiadmit export`: the policies as ValidatingAdmissionPolicies (and bindings) the API server runs itself.

Why a command: the in-tree objects are derived from the same policy files and config the webhook loads, so they
are regenerated, never hand-edited; the list of what stays with the webhook (and why) is printed every time, and
`--check` makes a policy marked `portable: true` that cannot be exported whole a CI failure.
"""

from __future__ import annotations

import os
import sys

import yaml

from webhook.app.commands import add_engine_options, load_engine
from webhook.k8s.versions import REFERENCE, version
from webhook.outputs import vapparams
from webhook.outputs.vap import export


def register(subparsers) -> None:
    parser = subparsers.add_parser("export", help="write the policies as ValidatingAdmissionPolicies and bindings")
    parser.add_argument("--kubernetes-version", default=REFERENCE.name, metavar="1.3X",
                        help=f"the API server the objects are for (1.35-1.37; default {REFERENCE})")
    parser.add_argument("--out", metavar="DIR", help="write one file per policy here (default: all to stdout)")
    parser.add_argument("--format", choices=("manifests", "static"), default="manifests",
                        help="manifests: to apply with kubectl; static: for the API server's staticManifestsDir "
                             "(names end in .static.k8s.io; files under validating-policies/)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a policy marked `portable: true` cannot be exported whole")
    add_engine_options(parser)
    parser.set_defaults(func=run)


def _dump(objects: list) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False, width=120, default_flow_style=False)


def report(results) -> list[str]:
    """What each policy exported, and every rule, mutation or kind left to the webhook with its reason."""
    lines = []
    for result in results:
        portable = " (portable: true)" if result.policy.document.get("portable") is True else ""
        rules = ", ".join(result.rules) or "nothing"
        lines.append(f"{result.policy.id}{portable}: exported {rules}")
        if result.mutations:
            lines.append(f"  mutations exported: {', '.join(result.mutations)}")
        lines += [f"  not exported: {what}: {why}" for what, why in result.left]
    return lines


def run(args) -> int:
    try:
        target = version(args.kubernetes_version)
    except ValueError as exc:
        print(f"error: --kubernetes-version: {exc}", file=sys.stderr)
        return 2
    static = args.format == "static"
    if static and target.minor < 36:
        print(f"error: --format static: Kubernetes {target} has no staticManifestsDir (alpha in 1.36, beta in "
              "1.37)", file=sys.stderr)
        return 2
    engine = load_engine(args)
    if engine is None:
        return 2
    results = export(engine.policies, engine.config, target, static)
    for line in report(results):
        print(line, file=sys.stderr)
    written = [r for r in results if r.objects or r.mutating]
    # the params' kind, typed from the policies that read a PolicyParams object (none with --format static)
    crds = [vapparams.crd([r.policy for r in written if r.params])] if any(r.params for r in written) else []
    if args.out:
        # static: the API server reads each admission plugin's objects from its own directory
        folders = {"objects": os.path.join(args.out, "validating-policies") if static else args.out,
                   "mutating": os.path.join(args.out, "mutating-policies") if static else args.out}
        if crds:  # its own folder: apply it first (`kubectl apply -f DIR/crds`), its objects need it established
            os.makedirs(os.path.join(args.out, "crds"), exist_ok=True)
            with open(os.path.join(args.out, "crds", "policyparams.yaml"), "w", encoding="utf-8") as handle:
                handle.write(_dump(crds))
        for result in written:
            parts = [("objects", result.params + result.objects), ("mutating", result.mutating)]
            by_folder: dict = {}
            for what, objects in parts:
                if objects:
                    by_folder.setdefault(folders[what], []).extend(objects)
            for folder, objects in by_folder.items():
                os.makedirs(folder, exist_ok=True)
                with open(os.path.join(folder, f"{result.policy.id}.yaml"), "w", encoding="utf-8") as handle:
                    handle.write(_dump(objects))
    elif not args.check:
        sys.stdout.write(_dump(crds + [o for r in written for o in r.params + r.objects + r.mutating]))
    if args.check:
        broken = [r.policy.id for r in results if r.policy.document.get("portable") is True and not r.whole]
        if broken:
            print(f"error: marked portable but not exported whole: {', '.join(broken)}", file=sys.stderr)
            return 1
    return 0
