"""The policy model: a compiled `Policy`, its `Rule`s, `Mutation`s and `Match`.

Built by language/compiler.py from a validated document (language/loader.py);
read by the engine. Nothing here parses or checks anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from webhook.cel.environment import Expression, Template
from webhook.k8s.selectors import selector_matches
from webhook.k8s.versions import DEFAULT_PORTABILITY, KubernetesVersion
from webhook.model.globs import any_matches

if TYPE_CHECKING:  # jsonschema is imported only where a schema rule is compiled
    from webhook.language.schemarule import SchemaRule

ACTION_RANK = {"audit": 0, "warn": 1, "deny": 2}
_SIDECAR = ("initContainers", "restartPolicy: Always")  # Policy.taken_as


class PolicyLoadError(Exception):
    """The policy set did not load; `problems` lists each as `file:line:col: field: message`."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


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
    presence: tuple = ()  # what its `when` requires, checked before any CEL (language/guards.py)
    needs_pod: bool = False  # reads the pod spec or its metadata: not run where a kind has no pod spec

    def __init__(self, name: str, message: Template, path: str = "", when: Optional[Expression] = None,
                 expression: Optional[Expression] = None, schema: Optional[SchemaRule] = None,
                 action: Optional[str] = None, requires: tuple[str, ...] = (), when_unknown: str = "skip",
                 variables: frozenset = frozenset(), target: str = "container", classes: frozenset = frozenset(),
                 presence: tuple = (), needs_pod: bool = False) -> None:
        self.name = name
        self.message = message
        self.path = path
        self.when = when
        self.expression = expression
        self.schema = schema
        self.action = action
        self.requires = requires
        self.when_unknown = when_unknown
        self.variables = variables
        self.target = target
        self.classes = classes
        self.presence = presence
        self.needs_pod = needs_pod
        # Derived once: the engine asks for it for every rule of every evaluation. A `when` that reads no cluster
        # fact decides first whether the rule applies (engine/core.py).
        self.early = self.when is not None and "cluster" not in self.when.variables


class Mutation:
    name: str
    target: str
    op: str
    path: str
    value: Expression
    when: Optional[Expression] = None
    variables: frozenset = frozenset()

    def __init__(self, name: str, target: str, op: str, path: str, value: Expression, when: Optional[Expression] = None,
                 variables: frozenset = frozenset()) -> None:
        self.name = name
        self.target = target
        self.op = op
        self.path = path
        self.value = value
        self.when = when
        self.variables = variables


class Match:
    classes: frozenset = frozenset()
    any_classes: frozenset = frozenset()
    kinds: frozenset = frozenset()
    exclude_kinds: frozenset = frozenset()
    namespaces: tuple = ()
    exclude_namespaces: tuple = ()
    selector: Optional[dict] = None

    def __init__(self, classes: frozenset = frozenset(), any_classes: frozenset = frozenset(),
                 kinds: frozenset = frozenset(), exclude_kinds: frozenset = frozenset(), namespaces: tuple = (),
                 exclude_namespaces: tuple = (), selector: Optional[dict] = None) -> None:
        self.classes = classes
        self.any_classes = any_classes
        self.kinds = kinds
        self.exclude_kinds = exclude_kinds
        self.namespaces = namespaces
        self.exclude_namespaces = exclude_namespaces
        self.selector = selector

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

    def admits_kind(self, kind: str) -> bool:
        """The kind half of `admits`: whether this policy judged objects of `kind` at all (provenance asks it of an
        owner's kind: a policy the owner's kind is excluded from never saw the owner's content)."""
        return kind not in self.exclude_kinds and (not self.kinds or kind in self.kinds)

    def admits_place(self, namespace: str, labels: dict) -> bool:
        """Whether the policy applies in this namespace to an object with these labels."""
        return self.admits_namespace(namespace) and (self.selector is None or selector_matches(self.selector, labels))

    def admits_namespace(self, namespace: str) -> bool:
        """The namespace half of `admits_place` (the engine keeps its answer per namespace)."""
        if self.namespaces and not any_matches(namespace, self.namespaces):
            return False
        return not any_matches(namespace, self.exclude_namespaces)


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
    document: dict
    variables: frozenset = frozenset()
    requires: frozenset = frozenset()
    ephemeral: bool = False
    checks: Any = None  # what compiles its programs (language/checks.py)
    named: dict  # its `variables`: name -> Expression, in order (lazy per binding)
    levels: dict  # name -> the level its variable is checked at (object, pod, container)
    # `kubernetesVersion`: the oldest API server its CEL stays portable to (webhook/k8s/versions.py)
    kubernetes_version: KubernetesVersion = DEFAULT_PORTABILITY

    def __init__(self, id: str, summary: str, why: str, remediation: str, docs: str, action: str, match: Match,
                 target: str, containers: str, params: dict, rules: list[Rule], mutations: list[Mutation], source: str,
                 document: dict | None = None, checks: Any = None, named: dict | None = None,
                 levels: dict | None = None, kubernetes_version: KubernetesVersion = DEFAULT_PORTABILITY) -> None:
        self.id = id
        self.summary = summary
        self.why = why
        self.remediation = remediation
        self.docs = docs
        self.action = action
        self.match = match
        self.target = target
        self.containers = containers
        self.params = params
        self.rules = rules
        self.mutations = mutations
        self.source = source
        self.document = {} if document is None else document
        self.checks = checks
        self.named = {} if named is None else named
        self.levels = {} if levels is None else levels
        self.kubernetes_version = kubernetes_version
        # Derived once: the engine asks for these on every evaluation.
        self.variables = frozenset().union(*(r.variables for r in self.rules), *(m.variables for m in self.mutations))
        self.requires = frozenset(fact for rule in self.rules for fact in rule.requires)
        # Ephemeral containers have no resources, ports or probes: most container rules make no sense for them,
        # but the hardening ones must see them (a privileged debug container is the node).
        self.ephemeral = self.document.get("ephemeralContainers") is True

    def expressions(self) -> list[Expression]:
        """Every CEL expression the policy is written with: each rule's `when`, `expression` and message parts, each
        mutation's `when` and `value`."""
        found: list[Expression] = []
        for rule in self.rules:
            found += [e for e in (rule.when, rule.expression) if e is not None]
            found += rule.message.expressions
        for mutation in self.mutations:
            found += [e for e in (mutation.when, mutation.value) if e is not None]
        return found + list(self.named.values())

    def takes(self, container) -> bool:
        """Whether this policy checks containers of this section (containers, initContainers, KServe's model)."""
        if container.section == "ephemeralContainers":  # kubectl debug: only where the policy asks for them
            return self.ephemeral
        if self.containers == "all" or self.containers == container.section:
            return True
        # containersAndSidecars: what runs for the pod's life, the native sidecars (restartPolicy: Always) too
        return self.containers == "containersAndSidecars" and (container.section == "containers" or (
            container.section == "initContainers" and container.obj.get("restartPolicy") == "Always"))

    @staticmethod
    def taken_as(container) -> Any:
        """All that `takes` reads of a container: containers alike in this are taken by the same policies (the
        engine keeps, per layout, which policies take each such container). Its section, or for a native sidecar
        (an init container with restartPolicy Always) a key no section name can be; nothing is allocated."""
        section = container.section
        if section == "initContainers" and container.obj.get("restartPolicy") == "Always":
            return _SIDECAR
        return section


