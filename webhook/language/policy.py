"""The policy language: load YAML `Policy` documents, validate them, compile every rule once.

Loading is all or nothing: one bad file fails the whole set with every problem
named by file, line and field, so a half-loaded bundle can never serve.
"""

from __future__ import annotations

import copy
import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Optional

from webhook.model import pointer as jp
from webhook.cel.environment import CelError, Expression, Template, required_presence
from webhook.model.resource import Resource
from webhook.language.schemacheck import errors as schema_errors
from webhook.language.schemacheck import locate_error
from webhook.inputs.sources import load_paths
from webhook.language.bundle import BUILTIN_POLICY_DIR, POLICY_SCHEMA_FILE

if TYPE_CHECKING:  # jsonschema is imported only where a schema rule is compiled
    from webhook.language.schemarule import SchemaRule

ACTION_RANK = {"audit": 0, "warn": 1, "deny": 2}
_PARAM_REF = re.compile(r"^\$\{params\.([A-Za-z_][A-Za-z0-9_]*)\}$")


class PolicyLoadError(Exception):
    """The policy set did not load; `problems` lists each as `file:line:col: field: message`."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Rule:
    name: str
    message: Template
    path: str = ""
    when: Optional[Expression] = None
    expression: Optional[Expression] = None
    schema: Optional[SchemaRule] = None
    action: Optional[str] = None
    requires: tuple[str, ...] = ()
    when_unknown: str = "skip"
    variables: frozenset = frozenset()
    target: str = "container"  # the level it is evaluated at: the policy's target, or `pod` in a container policy
    classes: frozenset = frozenset()  # the workload must have all of these for the rule to apply
    presence: tuple = ()  # (variable, field path) that its `when` requires, checked before any CEL
    needs_pod: bool = False  # reads the pod spec or its metadata: not run where a kind has no pod spec


@dataclass
class Mutation:
    name: str
    target: str
    op: str
    path: str
    value: Expression
    when: Optional[Expression] = None
    variables: frozenset = frozenset()


@dataclass
class Match:
    classes: frozenset = frozenset()
    any_classes: frozenset = frozenset()
    kinds: frozenset = frozenset()
    exclude_kinds: frozenset = frozenset()
    namespaces: tuple = ()
    exclude_namespaces: tuple = ()
    selector: Optional[dict] = None

    def admits(self, kind: str, classes: frozenset) -> bool:
        """Whether the policy is for this kind of workload (the engine caches this per kind and classes).

        A match that names no class and no kind matches nothing: a policy must say what it is about.
        """
        if self.kinds and kind not in self.kinds:
            return False
        if kind in self.exclude_kinds:
            return False
        if self.classes and not self.classes <= classes:
            return False
        if self.any_classes and not self.any_classes & classes:
            return False
        return bool(self.classes or self.any_classes or self.kinds)

    def admits_place(self, namespace: str, labels: dict) -> bool:
        """Whether the policy applies in this namespace to an object with these labels."""
        if self.namespaces and not any(fnmatch.fnmatchcase(namespace, p) for p in self.namespaces):
            return False
        if any(fnmatch.fnmatchcase(namespace, p) for p in self.exclude_namespaces):
            return False
        return self.selector is None or selector_matches(self.selector, labels)


def selector_matches(selector: dict, labels: dict) -> bool:
    """Kubernetes label selector semantics (matchLabels and matchExpressions are ANDed)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or ()
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


@dataclass
class Policy:
    id: str
    summary: str
    why: str
    remediation: str
    docs: str
    action: str
    match: Match
    target: str
    containers: str
    params: dict
    rules: list[Rule]
    mutations: list[Mutation]
    source: str
    document: dict = field(repr=False, default_factory=dict)
    variables: frozenset = field(init=False, default=frozenset())
    _verdicts: dict = field(init=False, default_factory=dict, repr=False)
    requires: frozenset = field(init=False, default=frozenset())

    def verdicts(self, rules: tuple) -> Expression:
        """One program giving every rule's verdict (`!when || expression`) as a list of booleans, built once per set.

        One CEL run instead of two per rule; a rule that raises makes the whole list raise, and the engine then
        runs the rules one by one to say which one could not be evaluated.
        """
        key = tuple(rule.name for rule in rules)
        found = self._verdicts.get(key)
        if found is None:
            found = self._verdicts[key] = Expression.combined("[" + ", ".join(
                f"!({rule.when.compiled}) || ({rule.expression.compiled})" if rule.when is not None
                else f"({rule.expression.compiled})" for rule in rules) + "]",
                frozenset().union(*(rule.variables for rule in rules)))
        return found

    def expressions(self) -> list[Expression]:
        """Every CEL expression the policy is written with: each rule's `when`, `expression` and message parts, each
        mutation's `when` and `value` (not the verdict programs combined from them)."""
        found: list[Expression] = []
        for rule in self.rules:
            found += [e for e in (rule.when, rule.expression) if e is not None]
            found += rule.message.expressions
        for mutation in self.mutations:
            found += [e for e in (mutation.when, mutation.value) if e is not None]
        return found

    def takes(self, container) -> bool:
        """Whether this policy checks containers of this section (containers, initContainers, KServe's model)."""
        return self.containers == "all" or self.containers == container.section

    def __post_init__(self) -> None:
        # Derived once: the engine asks for these on every evaluation.
        self.variables = frozenset().union(*(r.variables for r in self.rules), *(m.variables for m in self.mutations))
        self.requires = frozenset(fact for rule in self.rules for fact in rule.requires)


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


def compile_policy(doc: dict, source: str, params_override: Optional[dict] = None) -> Policy:
    """Compile one validated policy document. Raises (pointer, message) problems as ValueError tuples."""
    params = copy.deepcopy(doc.get("params") or {})
    for key, value in (params_override or {}).items():
        params[key] = value
    problems: list[tuple[str, str]] = []

    def expression(text: Optional[str], where: str) -> Optional[Expression]:
        if text is None:
            return None
        try:
            return Expression(text, params)
        except CelError as exc:
            problems.append((where, f"CEL does not compile: {exc}"))
            return None

    rules = []
    for position, raw in enumerate(doc["rules"]):
        where = f"/rules/{position}"
        try:
            message = Template(raw["message"], params)
        except CelError as exc:
            problems.append((f"{where}/message", f"CEL in message does not compile: {exc}"))
            continue
        rule = Rule(
            name=raw["name"],
            message=message,
            path=raw.get("path", ""),
            when=expression(raw.get("when"), f"{where}/when"),
            expression=expression(raw.get("expression"), f"{where}/expression"),
            action=raw.get("action"),
            requires=tuple(raw.get("requires", ())),
            when_unknown=raw.get("whenUnknown", "skip"),
            target=raw.get("target", doc["target"]),
            classes=frozenset(raw.get("classes", ())),
            presence=required_presence(raw["when"]) if raw.get("when") else (),
        )
        if rule.target != doc["target"] and not (rule.target == "pod" and doc["target"] == "container"):
            problems.append((f"{where}/target", "only a rule of a container policy can target the pod"))
        if "schema" in raw:
            try:
                from webhook.language.schemarule import SchemaRule

                rule.schema = SchemaRule(_substitute_params(raw["schema"], params, f"{where}/schema"))
            except ValueError as exc:
                problems.append((f"{where}/schema", str(exc)))
        parts = [p for p in (rule.when, rule.expression) if p is not None]
        rule.variables = message.variables.union(*(p.variables for p in parts))
        rule.needs_pod = bool(rule.variables & {"pod", "podMeta"})
        if rule.schema is not None and doc["target"] == "container":
            rule.variables |= {"container"}
        rules.append(rule)

    mutations = []
    for position, raw in enumerate(doc.get("mutations") or ()):
        where = f"/mutations/{position}"
        value = expression(raw["value"], f"{where}/value")
        when = expression(raw.get("when"), f"{where}/when")
        target = raw.get("target", doc["target"])
        if target not in ("pod", "container"):
            problems.append((f"{where}/target", "a mutation targets a pod or a container"))
        if value is not None:
            variables = value.variables | (when.variables if when else frozenset())
            mutations.append(Mutation(raw["name"], target, raw["op"], raw["path"], value, when, variables))

    names = [r["name"] for r in doc["rules"]]
    for position, name in enumerate(names):
        if names.index(name) != position:
            problems.append((f"/rules/{position}/name", f"rule name {name!r} is used twice"))
    if problems:
        raise _Problems(problems)

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
    return Policy(
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
        source=source,
        document=doc,
    )


class _Problems(Exception):
    def __init__(self, problems: list[tuple[str, str]]):
        super().__init__(problems)
        self.problems = problems


def _format(resource: Resource, pointer: str, message: str) -> str:
    line, column = resource.origin.position(pointer)
    field_name = jp.to_dotted(pointer) or "(document)"
    return f"{resource.origin.file}:{line}:{column}: {field_name}: {message}"


def policy_files(paths: Iterable[str]) -> list[str]:
    """Policy files of the given files/directories; the language's schema file is not a policy."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                if name.endswith((".yaml", ".yml")):
                    out.append(os.path.join(path, name))
        else:
            out.append(path)
    return out


def load_policies(paths: Iterable[str], params: Optional[dict[str, dict]] = None) -> list[Policy]:
    """Load, validate and compile every policy in `paths`; raise PolicyLoadError on any problem."""
    files = policy_files(paths)
    loaded = load_paths(files)
    problems = [f"{e.file}:{e.line}:{e.column}: {e.message}" for e in loaded.errors + loaded.skipped]
    texts: dict[str, str] = {}
    policies: list[Policy] = []
    seen: dict[str, str] = {}
    for resource in loaded.resources:
        doc = resource.obj
        if doc.get("kind") != "Policy" and not str(doc.get("apiVersion", "")).startswith("aiadmit.dev/"):
            problems.append(_format(resource, "/kind", f"not a Policy document (kind {doc.get('kind')!r})"))
            continue
        path = resource.origin.file or ""
        if path not in texts:
            texts[path] = _text_of(path)
        errors = schema_errors(POLICY_SCHEMA_FILE, doc, texts[path], str(resource.origin.document))
        if errors:
            for error in errors:
                problems.append(_format(resource, *_schema_problem(error)))
            continue
        name = doc["metadata"]["name"]
        if name in seen:
            problems.append(_format(resource, "/metadata/name", f"policy {name!r} is already defined in {seen[name]}"))
            continue
        seen[name] = resource.origin.file or "?"
        try:
            policies.append(compile_policy(doc, resource.origin.file or "?", (params or {}).get(name)))
        except _Problems as exc:
            problems += [_format(resource, where, message) for where, message in exc.problems]
    if not files:
        problems.append("no policy files given")
    elif not policies and not problems:
        problems.append(f"no Policy documents found in {', '.join(files)}")
    if problems:
        raise PolicyLoadError(problems)
    return policies


def _text_of(path: str) -> Optional[str]:
    """The text a policy document was loaded from, which names it for the schema-check cache; None if unknown."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None  # then it is simply checked, every time


def _schema_problem(error) -> tuple[str, str]:
    if error.validator == "oneOf" and "expression" in str(error.schema):
        return jp.join("", *error.absolute_path), "a rule has exactly one of `expression` or `schema`"
    return locate_error(error)
