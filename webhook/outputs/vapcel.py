"""aiadmit's CEL rewritten as a ValidatingAdmissionPolicy's: the names the engine binds, spelt in what the API server
binds (`object`, `variables`), and the pod-template walk of each kind written in CEL.

Why token by token: aiadmit's rules are already Kubernetes CEL; only the names differ. The engine binds `pod`,
`container`, `template`, `containerName` and `workload` as it walks; a VAP has `object` and its own `variables`,
which are evaluated once per object, not per container. So a rule's named variables are written into it (they may
read `container`), the walk becomes comprehensions over `variables.templates`, and every name that has no spelling
in the API server (cluster facts, aiadmit's classification) makes the rule not exportable, with that reason. The
rewrite works on the lexer's tokens, so string literals and field names are never touched.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Mapping, Optional

from webhook.cel.lexer import tokenize
from webhook.cel.library import FUNCTIONS

# workload.FIELD -> its spelling over the admitted object
_WORKLOAD = {
    "kind": "object.kind",
    "name": "object.metadata.name",
    "namespace": "request.namespace",
    "labels": "(has(object.metadata.labels) ? object.metadata.labels : {})",
    "annotations": "(has(object.metadata.annotations) ? object.metadata.annotations : {})",
    "devices": "variables.devices",
}
_WORKLOAD_WHY = {
    "classes": "aiadmit's classification of the workload (workload.classes)",
    "role": "aiadmit's workload role (workload.role: kinds table, role label)",
    "tier": "aiadmit's trust tier (workload.tier: object, namespace and template labels)",
    "podCount": "the pod count aiadmit computes from replica fields (workload.podCount)",
}
# names bound by the walk -> their spelling inside it
_WALKED = {"pod": "tpl.spec", "podMeta": "tpl.metadata", "template": "tpl.name", "containerName": "container.name",
           "injected": "[]",
           # the pod-level resources, {} where the template declares none (binding.pod_resources); dyn on both sides
           # because a typed ResourceRequirements and a map literal have no common type for the conditional
           "podResources": "(has(tpl.spec.resources) ? dyn(tpl.spec.resources) : dyn({}))"}
_NOT_BOUND = {
    "cluster": "it reads cluster facts (`cluster`: quotas, priority classes, nodes, queues), which a "
               "ValidatingAdmissionPolicy cannot see",
    "templates": "it reads aiadmit's `templates` view (pod counts per template)",
    "templateDevices": "it reads `templateDevices`, aiadmit's per-template device list",
    "envFrom": "it reads `envFrom` as resolved from ConfigMaps and Secrets (cluster facts)",
    "claims": "it reads `claims`, the DRA devices aiadmit resolves from the ResourceClaims and templates a "
              "container names (cluster facts)",
    "podClaims": "it reads `podClaims`, the DRA devices aiadmit resolves for a pod's running containers "
                 "(cluster facts)",
    "claimDevices": "it reads `claimDevices`, aiadmit's reading of a ResourceClaim's device requests",
    "containerType": "it reads `containerType`, aiadmit's name of a container's section",
    "request": "it reads aiadmit's `request` view, whose `kind` is a string where the API server's is a "
               "group/version/kind",
}


class NotExportable(Exception):
    """A rule or expression that has no equal in the API server's CEL; the message is the reason."""


def _variable_sources(named: Mapping[str, object]) -> dict[str, str]:
    return {name: expression.compiled for name, expression in named.items()}


def rewrite(source: str, named: Mapping[str, str], depth: int = 0) -> str:
    """`source` in the API server's names (`params.X` read from the param object's `spec`); NotExportable with the reason otherwise.

    `named`: the policy's variables, name -> source, each written into the expression in parentheses."""
    if depth > 16:
        raise NotExportable("its variables refer to each other too deeply to be written out")
    source = _quantities_of_strings(source)
    tokens = tokenize(source)
    out: list[str] = []
    position = 0
    index = 0
    if any(kind == "ident" and value == "tpl" for kind, value, _ in tokens):
        raise NotExportable("it uses the name `tpl`, which the exported walk binds")
    for at, (kind, value, _) in enumerate(tokens[:-1]):
        function = FUNCTIONS.get(value) if kind == "ident" and tokens[at + 1][:2] == ("op", "(") else None
        if function is not None and function.origin == "aiadmit":
            raise NotExportable(f"it calls {value}(), an aiadmit extension function the API server does not have")
    while index < len(tokens):
        kind, value, start = tokens[index]
        if kind != "ident" or (index and tokens[index - 1][:2] == ("op", ".")):
            index += 1
            continue
        follows_dot = index + 2 < len(tokens) and tokens[index + 1][:2] == ("op", ".") and \
            tokens[index + 2][0] == "ident"
        replacement: Optional[str] = None
        end_index = index + 1
        if value == "variables" and follows_dot:
            name = tokens[index + 2][1]
            if name not in named:
                raise NotExportable(f"it reads variables.{name}, which the policy does not declare")
            replacement = "(" + rewrite(named[name], named, depth + 1) + ")"
            end_index = index + 3
        elif value == "workload":
            if not follows_dot:
                raise NotExportable("it reads `workload` whole")
            field = tokens[index + 2][1]
            if field in _WORKLOAD_WHY:
                raise NotExportable(f"it reads {_WORKLOAD_WHY[field]}")
            replacement = _WORKLOAD[field]
            end_index = index + 3
        elif value == "params":  # the PolicyParams object's (outputs/vapparams.py); none left where folded
            replacement = "params.spec"
        elif value in _NOT_BOUND:
            raise NotExportable(_NOT_BOUND[value])
        elif value in _WALKED:
            replacement = _WALKED[value]
        if replacement is not None:
            out.append(source[position:start])
            out.append(replacement)
            last = tokens[end_index - 1]  # an identifier: its text is its value
            position = last[2] + len(last[1])
        index = end_index
    out.append(source[position:])
    return "".join(out)


def _quantities_of_strings(source: str) -> str:
    """`quantity(x)` as `quantity(string(x))`: aiadmit's quantity() takes a number too (a CRD's int-or-string
    `nvidia.com/gpu: 2` is an int there), Kubernetes' only a string, and string() of a string is that string."""
    tokens = tokenize(source)
    inserts: list[tuple[int, str]] = []
    for at, (kind, value, start) in enumerate(tokens[:-1]):
        if kind != "ident" or value != "quantity" or tokens[at + 1][:2] != ("op", "(") or \
                (at and tokens[at - 1][:2] == ("op", ".")):
            continue
        depth = 0
        for close in range(at + 1, len(tokens)):
            if tokens[close][0] == "op" and tokens[close][1] in "([{":
                depth += 1
            elif tokens[close][0] == "op" and tokens[close][1] in ")]}":
                depth -= 1
                if depth == 0:
                    break
        inserts += [(tokens[at + 1][2] + 1, "string("), (tokens[close][2], ")")]
    for position, text in sorted(inserts, reverse=True):
        source = source[:position] + text + source[position:]
    return source


def literal(text: str) -> str:
    """A CEL string literal."""
    return json.dumps(text, ensure_ascii=False)


def glob_regex(patterns: Iterable[str]) -> str:
    """RE2 for `fnmatch` globs of resource names (the config's accelerators): `*` any run, the rest literal."""
    parts = []
    for pattern in patterns:
        parts.append("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))
    return "^(" + "|".join(parts) + ")$"


# ---------------------------------------------------------------------------------------------- the walk
def _path(base: str, relative: str) -> tuple[str, list[str]]:
    """`base.a.b` for a relative pointer `a/b`, with the has() guards that keep it from erroring."""
    expr, guards = base, []
    for step in [s for s in relative.split("/") if s]:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", step):
            raise NotExportable(f"the template path step {step!r} is not a CEL field name")
        guards.append(f"has({expr}.{step})")
        expr = f"{expr}.{step}"
    return expr, guards


def template_items(entry: Mapping, depth: int = 0, pointers: bool = False) -> str:
    """CEL for the list of this kinds-table template entry's pod templates, each {"name", "spec", "metadata"}
    (and with `pointers`, "path": the JSON pointer of the spec, for a MutatingAdmissionPolicy's JSON Patch).

    `at` may hold `*` (every map value or list item); "{*}" in the name is the key or index it matched, as the
    engine names it (webhook/k8s/podtemplates.py)."""
    at = entry.get("at", "")
    steps = [s for s in at.split("/") if s]
    spec = entry.get("spec", "template/spec")
    metadata = entry.get("metadata", "template/metadata")
    name = entry.get("name", "template")
    if spec is None:
        raise NotExportable("its template has no pod spec")
    if entry.get("containers") or entry.get("copies"):
        raise NotExportable("its operator adds containers or metadata the walk does not write")

    def item(base: str, key: Optional[str], pointer: str) -> str:
        spec_expr, spec_guards = _path(base, spec)
        if metadata is None:
            meta = "{}"
        else:
            meta_expr, meta_guards = _path(base, metadata)
            meta = f"({' && '.join(meta_guards)} ? {meta_expr} : {{}})" if meta_guards else meta_expr
        label = literal(name) if key is None else \
            " + ".join(p for p in (literal(name.split("{*}")[0]) if name.split("{*}")[0] else "", key,
                                   literal(name.split("{*}")[1]) if name.split("{*}")[1] else "") if p)
        one = f'{{"name": dyn({label}), "spec": dyn({spec_expr}), "metadata": dyn({meta})'
        one += f', "path": dyn({_join(pointer, spec)})}}' if pointers else "}"
        return f"({' && '.join(spec_guards)} ? [{one}] : [])" if spec_guards else f"[{one}]"

    def walk(base: str, rest: list[str], key: Optional[str], level: int, pointer: str) -> str:
        if not rest:
            return item(base, key, pointer)
        if "*" in rest:
            star = rest.index("*")
            expr, guards = _path(base, "/".join(rest[:star]))
            k, v = f"k{level}", f"i{level}"
            # a map's values by key, a list's items by index (both: "{*}" names the key or the index)
            at_star = _join(pointer, "/".join(rest[:star]))
            escaped = f'{k}.replace("~", "~0").replace("/", "~1")'  # a key as a JSON pointer step (RFC 6901)
            inner_map = walk(f"{expr}[{k}]", rest[star + 1:], k, level + 1, f'{at_star} + "/" + {escaped}')
            # list items are named by `name` (JobSet), else `groupName` (KubeRay), else their index
            item_expr = f"{expr}[{v}]"
            label = (f"(type({item_expr}) == map && has({item_expr}.name) && {item_expr}.name != \"\" ? "
                     f"string({item_expr}.name) : type({item_expr}) == map && has({item_expr}.groupName) && "
                     f"{item_expr}.groupName != \"\" ? string({item_expr}.groupName) : string({v}))")
            inner_list = walk(item_expr, rest[star + 1:], label, level + 1, f'{at_star} + "/" + string({v})')
            body = (f"(type({expr}) == map ? {expr}.map({k}, {inner_map}).flatten() : "
                    f"type({expr}) == list ? lists.range(size({expr})).map({v}, {inner_list}).flatten() : [])")
            return f"({' && '.join(guards)} ? {body} : [])" if guards else body
        return _guarded(base, rest, key, item, pointer)

    return walk("object", steps, None, depth, '""')


def _join(pointer: str, relative: str) -> str:
    """The CEL string of `pointer` (a CEL string expression) followed by the steps of `relative`."""
    steps = [s for s in relative.split("/") if s]
    if not steps:
        return pointer
    tail = literal("/" + "/".join(steps))
    return tail if pointer == '""' else f"{pointer} + {tail}"


def _guarded(base: str, rest: list[str], key: Optional[str], item, pointer: str) -> str:
    expr, guards = _path(base, "/".join(rest))
    inner = item(expr, key, _join(pointer, "/".join(rest)))
    return f"({' && '.join(guards)} ? {inner} : [])" if guards else inner
