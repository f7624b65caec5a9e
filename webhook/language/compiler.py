"""Compiling one validated `Policy` document: every CEL expression and JSON Schema rule built once.

Parameters are constants once the config is loaded: CEL sources are checked with
`params` declared as a constant and get them inlined as literals for the run
(cel/environment.py), schema rules get every `"${params.NAME}"` string replaced
by the value. Each expression is checked against the declarations of its level
(language/declarations.py). A problem is reported as a (JSON pointer, message,
offset) triple — the offset in the expression as written, or None — which the
loader turns into file:line:col.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Optional

from webhook.cel import patterns
from webhook.cel.constants import WHOLE, Struct
from webhook.cel.limits import Limits
from webhook.cel.environment import CelError, Expression, MessageExpression, Template
from webhook.k8s.versions import DEFAULT_PORTABILITY, version as kubernetes_version
from webhook.language.checks import Checks
from webhook.language.declarations import for_level
from webhook.language.guards import python_guards
from webhook.language.policy import Match, Mutation, Policy, Rule
from webhook.language import transcript
from webhook.language.schemanative import NativeSchemaRule, compile_schema
from webhook.model import pointer as jp

_PARAM_REF = re.compile(r"^\$\{params\.([A-Za-z_][A-Za-z0-9_]*)\}$")


def _substitute_params(value: Any, params: dict, where: str) -> Any:
    """Replace every string "${params.NAME}" inside a schema by the parameter's value."""
    if isinstance(value, dict):
        return {k: _substitute_params(v, params, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute_params(v, params, where) for v in value]
    if isinstance(value, str):
        match = _PARAM_REF.match(value)
        if match:
            if match.group(1) not in params:
                raise ValueError(f"{where}: unknown parameter {match.group(1)!r}")
            return params[match.group(1)]
    return value


def compile_policy(doc: dict, source: str, params_override: Optional[dict] = None,
                   checks: Optional[Checks] = None, limits: Optional[Limits] = None) -> Policy:
    """Compile one validated policy document; raises `Problems` with every (pointer, message) found.

    `checks` answers CEL checks of sources seen before (language/checks.py); by default the bundle's record. With
    the command line's cache, the checks of this document's last compile are replayed (language/transcript.py)."""
    checks = checks or Checks()
    transcribing = transcript.for_document(checks, doc, params_override, limits)
    if transcribing is None:
        return _compile_policy(doc, source, params_override, checks, limits, checks)
    try:
        policy = _compile_policy(doc, source, params_override, transcribing, limits, checks)
    except transcript.Diverged:  # compiled again, every check asked afresh, and the transcript rewritten
        transcribing = transcript.Transcribing(checks, transcribing.kept_as)
        policy = _compile_policy(doc, source, params_override, transcribing, limits, checks)
    transcribing.finished()
    return policy


def _compile_policy(doc: dict, source: str, params_override: Optional[dict], checks: Checks,
                    limits: Optional[Limits], kept: Checks) -> Policy:
    """compile_policy with `checks` answering the CEL checks and `kept` the Checks the policy keeps."""
    params = copy.deepcopy(doc.get("params") or {})
    for key, value in (params_override or {}).items():
        params[key] = value
    problems: list[tuple] = []
    portable = _portability(doc, problems)
    broken: set[str] = set()  # variables that did not compile: what reads them is not reported again
    reported: set[tuple] = set()  # params whose value was reported (once, however many expressions use it)

    def at_param(exc: CelError, user: str) -> bool:
        """A param's value that is the mistake (a non-RE2 pattern, a quantity that does not parse: cel/patterns.py)
        is reported at that value, once, however many expressions use it."""
        param = getattr(exc, "param", None)
        if not param or param[0] not in params:
            return False
        if param not in reported:  # an override is located in the config file by the loader (the 4th item)
            reported.add(param)
            problems.append((jp.join("/params", *map(str, param)), f"{exc.message} (used by {user})", None,
                             param if param[0] in (params_override or {}) else None))
        return True

    constants: dict[str, list] = {}  # named variables that are constants of the params (cel/patterns.py)
    named, levels = _variables(doc, params, checks, problems, limits, portable, broken, at_param, constants)

    declared: dict[str, dict] = {}

    def declarations(level: str) -> dict:
        """The level's declarations with the variables visible there: one mapping per level, shared by every
        expression of the policy (the record's key spells each mapping once: language/celrecord.py)."""
        found = declared.get(level)
        if found is None:
            found = declared[level] = for_level(level, visible_variables(named, levels, level))
        return found

    def expression(text: Optional[str], where: str, level: str, name: str) -> Optional[Expression]:
        if text is None:
            return None
        try:
            return Expression(text, params, checks, declarations(level), limits, portable=portable,
                              constants=reading(constants, text))
        except CelError as exc:
            if at_param(exc, f"{name}'s expression"):
                return None
            if not reads_broken(text, broken):
                problems.append((where, f"{name}: CEL does not compile: {exc.message}", exc.offset))
            return None

    def reads(found: frozenset, by_name: frozenset) -> frozenset:
        return binding_reads(found, named_reads, by_name)

    named_reads = _named_reads(named)
    guard_sources = {name: e.source for name, e in named.items()}  # what a `when`'s variables.NAME stands for

    rules = []
    for position, raw in enumerate(doc["rules"]):
        where = f"/rules/{position}"
        level = raw.get("target", doc["target"])
        if level not in ("object", "pod", "container"):
            level = doc["target"]
        try:
            message = Template(raw.get("message", ""), params, checks, declarations(level), limits,
                               portable, reading(constants, raw.get("message", "")))
        except CelError as exc:
            if not at_param(exc, f"rule {raw['name']}'s message") and not reads_broken(raw.get("message"), broken):
                problems.append((f"{where}/message", f"rule {raw['name']}: CEL in message does not compile: "
                                                     f"{exc.message}", exc.offset))
            continue
        if "messageExpression" in raw:
            try:
                message = MessageExpression(raw["messageExpression"], params, checks, declarations(level),
                                            limits, fallback=message if raw.get("message") else None,
                                            portable=portable,
                                            constants=reading(constants, raw["messageExpression"]))
            except CelError as exc:
                if not at_param(exc, f"rule {raw['name']}'s messageExpression") and \
                        not reads_broken(raw["messageExpression"], broken):
                    problems.append((f"{where}/messageExpression", f"rule {raw['name']}: messageExpression does "
                                                                   f"not compile: {exc.message}", exc.offset))
                continue
            if message.expression.type not in ("string", "dyn"):
                problems.append((f"{where}/messageExpression", f"rule {raw['name']}: messageExpression must be a "
                                                               f"string, not a {message.expression.type}", 0))
                continue
        rule = Rule(
            name=raw["name"],
            message=message,
            path=raw.get("path", ""),
            when=expression(raw.get("when"), f"{where}/when", level, f"rule {raw['name']}"),
            expression=expression(raw.get("expression"), f"{where}/expression", level, f"rule {raw['name']}"),
            action=raw.get("action"),
            requires=tuple(raw.get("requires", ())),
            when_unknown=raw.get("whenUnknown", "skip"),
            target=raw.get("target", doc["target"]),
            classes=frozenset(raw.get("classes", ())),
            presence=python_guards(raw["when"], guard_sources) if raw.get("when") else (),
        )
        if rule.target != doc["target"] and not (rule.target == "pod" and doc["target"] == "container"):
            problems.append((f"{where}/target", "only a rule of a container policy can target the pod"))
        if "schema" in raw:
            try:
                schema = _substitute_params(raw["schema"], params, f"{where}/schema")
                native = compile_schema(schema)  # the common keywords, without importing jsonschema
                if native is not None:
                    rule.schema = NativeSchemaRule(native, schema)
                else:
                    from webhook.language.schemarule import SchemaRule

                    rule.schema = SchemaRule(schema)
            except ValueError as exc:
                problems.append((f"{where}/schema", str(exc)))
        parts = [p for p in (rule.when, rule.expression) if p is not None]
        rule.variables = reads(message.variables.union(*(p.variables for p in parts)),
                               message.named.union(*(p.named for p in parts)))
        rule.needs_pod = bool(rule.variables & {"pod", "podMeta"})
        if rule.schema is not None and doc["target"] == "container":
            rule.variables |= {"container"}
        rules.append(rule)

    mutations = []
    for position, raw in enumerate(doc.get("mutations") or ()):
        where = f"/mutations/{position}"
        target = raw.get("target", doc["target"])
        level = target if target in ("pod", "container") else doc["target"]
        value = expression(raw["value"], f"{where}/value", level, f"mutation {raw['name']}")
        when = expression(raw.get("when"), f"{where}/when", level, f"mutation {raw['name']}")
        if target not in ("pod", "container"):
            problems.append((f"{where}/target", "a mutation targets a pod or a container"))
        if value is not None:
            variables = reads(value.variables | (when.variables if when else frozenset()),
                              value.named | (when.named if when else frozenset()))
            mutations.append(Mutation(raw["name"], target, raw["op"], raw["path"], value, when, variables))

    names = [r["name"] for r in doc["rules"]]
    for position, name in enumerate(names):
        if names.index(name) != position:
            problems.append((f"/rules/{position}/name", f"rule name {name!r} is used twice"))
    problems += _unknown_kinds(doc.get("match") or {})
    if problems:
        raise Problems(problems)

    raw_match = doc.get("match") or {}
    match = Match(
        classes=frozenset(raw_match.get("classes", ())),
        any_classes=frozenset(raw_match.get("anyClasses", ())),
        kinds=frozenset(raw_match.get("kinds", ())),
        exclude_kinds=frozenset(raw_match.get("excludeKinds", ())),
        namespaces=tuple(raw_match.get("namespaces", ())),
        exclude_namespaces=tuple(raw_match.get("excludeNamespaces", ())),
        selector=raw_match.get("selector"),
    )
    policy_id = doc["metadata"]["name"]
    policy = Policy(
        id=policy_id,
        summary=doc["summary"].strip(),
        why=doc["why"].strip(),
        remediation=doc["remediation"].strip(),
        docs=doc["metadata"].get("docs", f"docs/policies.md#{policy_id}"),
        action=doc["action"],
        match=match,
        target=doc["target"],
        containers=doc.get("containers", "all"),
        params=params,
        rules=rules,
        mutations=mutations,
        named=named,
        levels=levels,
        source=source,
        document=doc,
        checks=kept,
        kubernetes_version=portable,
    )
    if named:  # each reader computes the variables it reads in place (once per binding): no program call for them
        sources = {name: e.compiled for name, e in named.items()}
        for expression in policy.expressions():
            if "variables" in expression.variables:
                expression.inline = sources
    return policy


def _unknown_kinds(raw_match: dict) -> list[tuple]:
    """A kind in match.kinds/excludeKinds that the kinds table does not know would silently match nothing (a
    misspelling) unless the author says it is a CRD kind aiadmit does not list (`unknownKinds: allow`)."""
    if raw_match.get("unknownKinds") == "allow":
        return []
    from webhook.k8s.kindnames import known_kinds

    known, problems = known_kinds(), []
    for key in ("kinds", "excludeKinds"):
        for position, kind in enumerate(raw_match.get(key) or ()):
            if kind in known:
                continue
            from difflib import get_close_matches  # only for a kind it does not know: 0.4 % of a one-file audit
            close = get_close_matches(kind, sorted(known), n=1, cutoff=0.6) or \
                [k for k in sorted(known) if k.lower() == str(kind).lower()]
            hint = f": did you mean {close[0]!r}?" if close else ""
            problems.append((f"/match/{key}/{position}", f"kind {kind!r} is not a kind aiadmit knows{hint} (a "
                             f"custom resource kind the kinds table does not list: set match.unknownKinds: allow)"))
    return problems


def visible_variables(named: dict, levels: dict, level: str) -> Optional[Struct]:
    """The named variables a rule at `level` may read: those whose expression needs no deeper level (None: the
    policy has none, so `variables` is not declared at all)."""
    if not named:
        return None
    order = ("object", "pod", "container")
    return Struct("variables", {name: e.type for name, e in named.items()
                                if order.index(levels[name]) <= order.index(level)})


def binding_reads(found: frozenset, named_reads: dict, by_name: frozenset) -> frozenset:
    """What binding must provide: the names read, and through `variables` what the variables they read by name
    (`by_name`, as the checker found it: cel/checker.py) read; all of them if `variables` is read whole. Only
    those: a rule that reads no pod-level variable must still run where a kind has no pod spec."""
    if "variables" not in found:
        return found
    names = named_reads if WHOLE in by_name else by_name
    return found.union(*(named_reads[n] for n in names if n in named_reads))


def policy_expression(policy: Policy, source: str, level: str, limits: Optional[Limits] = None,
                      portable=None) -> tuple[Expression, frozenset]:
    """One expression as a rule of `policy` at `level` sees it (`aiadmit cel --policy`): checked with the policy's
    params and the level's declarations, the policy's variables visible at that level included; reading them in
    place as the policy's own rules do (portable to `portable`, by default the policy's kubernetesVersion). Returns it
    with what binding must provide for it (binding_reads).

    Raises CelError with the offset in `source`, as a rule's check at load would."""
    constants: dict[str, list] = {}
    for name, named in policy.named.items():  # in order: a variable may be a constant through an earlier one
        found = patterns.of_source(named.source, policy.params, constants)
        if found is not None:
            constants[name] = found
    expression = Expression(source, policy.params, policy.checks,
                            for_level(level, visible_variables(policy.named, policy.levels, level)), limits,
                            portable=portable or policy.kubernetes_version, constants=reading(constants, source))
    reads = binding_reads(expression.variables, _named_reads(policy.named), expression.named)
    if policy.named and "variables" in expression.variables:
        expression.inline = {name: e.compiled for name, e in policy.named.items()}
    return expression, reads


def _named_reads(named: dict) -> dict:
    """name -> what reading that variable makes binding provide: its own names, and those of the variables it reads
    by name (earlier ones, so one pass in order is transitive); reading `variables` whole, every variable's."""
    every = frozenset().union(*(expression.variables for expression in named.values()))
    found: dict[str, frozenset] = {}
    for name, expression in named.items():  # in the document's order (language/compiler.py _variables)
        if WHOLE in expression.named:
            found[name] = every
        else:
            found[name] = expression.variables.union(*(found[n] for n in expression.named if n in found))
    return found


def _portability(doc: dict, problems: list):
    """The policy's `kubernetesVersion` (the schema allows only supported names), by default the oldest supported."""
    try:
        return kubernetes_version(doc["kubernetesVersion"]) if "kubernetesVersion" in doc else DEFAULT_PORTABILITY
    except (TypeError, ValueError) as exc:
        problems.append(("/kubernetesVersion", str(exc)))
        return DEFAULT_PORTABILITY


def _variables(doc: dict, params: dict, checks: Checks, problems: list, limits: Optional[Limits], portable,
               broken: set, at_param=None, constants: Optional[dict] = None) -> tuple[dict, dict]:
    """The policy's named `variables`, in order: each checked at the shallowest level it needs (object, pod, then
    the policy's target), reading the earlier ones as `variables.NAME`. (name -> Expression, name -> level)
    `constants` gets each one that is a constant of the params: what reads it checks those values as the params'."""
    constants = {} if constants is None else constants
    order = ("object", "pod", "container")
    deepest = order.index(doc["target"])
    named: dict[str, Expression] = {}
    levels: dict[str, str] = {}
    for position, raw in enumerate(doc.get("variables") or ()):
        name, where = raw["name"], f"/variables/{position}/expression"
        if name in named:
            problems.append((f"/variables/{position}/name", f"variable {name!r} is defined twice"))
            continue
        error = None
        for level in order[:deepest + 1]:
            earlier = Struct("variables", {n: e.type for n, e in named.items()
                                           if order.index(levels[n]) <= order.index(level)})
            try:
                named[name] = Expression(raw["expression"], params, checks, for_level(level, earlier), limits,
                                         portable=portable, constants=reading(constants, raw["expression"]))
                levels[name] = level
                break
            except CelError as exc:  # a copy, not `exc`: its traceback holds this frame, a cycle that kept the
                error = CelError(exc.message, exc.offset, exc.param)  # callers' frames (an audit's findings) alive until gc
        else:
            if at_param is not None and at_param(error, f"variable {name}"):
                pass
            elif not reads_broken(raw["expression"], broken):  # else its error follows from the earlier one
                problems.append((where, f"variable {name}: CEL does not compile: {error.message}", error.offset))
            broken.add(name)
        if name in named and not getattr(checks, "replaying", False):  # a replay's checks need no constants
            found = patterns.of_source(raw["expression"], params, constants)
            if found is not None:
                constants[name] = found
    return named, levels


def reading(constants: dict, text: Any) -> Optional[dict]:
    """The constant named variables `text` may read (None: none), so that other expressions' checks keep their
    record keys (language/celrecord.py)."""
    if not constants or not isinstance(text, str) or "variables" not in text:
        return None
    return {name: found for name, found in constants.items() if name in text} or None


_NAMED = re.compile(r"\bvariables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")


def reads_broken(text, broken: set) -> bool:
    """Whether an expression reads a variable that did not compile: its own error would be a follow-on of that
    one (`variables has no field ...`, `undeclared reference to 'variables'`), reported once at the root cause."""
    return bool(broken) and isinstance(text, str) and any(name in broken for name in _NAMED.findall(text))


class Problems(Exception):
    """Every (JSON pointer, message[, offset in the expression]) that kept one document from compiling."""

    def __init__(self, problems: list[tuple]):
        super().__init__(problems)
        self.problems = problems
