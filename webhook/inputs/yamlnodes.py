"""Python objects straight from composed YAML nodes: the fast half of loading manifests.

libyaml parses and composes in C, and the composer has already resolved each
scalar's tag (go-yaml v2's tag: the loader's resolver, webhook/inputs/sources.py); PyYAML's constructor then
spends most of the load time in generic, generator-based Python. Manifests use a small corner of YAML (maps,
lists, strings, ints, floats, bools, nulls, an occasional anchor or merge key), so this walks the node tree once
and builds the values directly, deferring to PyYAML's constructor (with the loader's constructors: the same
values) for merge keys. Values are what Kubernetes makes of them (`scalar`: webhook/model/goyaml.py; `0o10` and
`1e3` are numbers, `1.0` the int 1, `1:30` and dates strings, `.inf` refused) and each map key is the string
Kubernetes makes of it (webhook/model/yamlkeys.py: `1:` is "1", `yes:` "true"; a null key is an input error),
because a value or key read otherwise is not the object that will run.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Optional

import yaml

from webhook.model.goyaml import CORE, Refused, json_value, tagged
from webhook.model.yamlkeys import key_name, mark_spelt

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_MERGE = "tag:yaml.org,2002:merge"
_PLAIN_INT = re.compile(r"[-+]?(0|[1-9][0-9]{0,17})\Z")  # a decimal int64 for certain: int() of it is go-yaml's


def not_a_bool(node: yaml.Node) -> yaml.constructor.ConstructorError:
    """The error for `!!bool maybe` (PyYAML's constructor raised a bare KeyError: a traceback), with its position;
    kubectl refuses it too ("cannot decode !!str `maybe` as a !!bool")."""
    return yaml.constructor.ConstructorError(
        None, None, f"!!bool {node.value!r} is not a boolean to Kubernetes' YAML reader (go-yaml v2)", node.start_mark)


def scalar(node: yaml.ScalarNode) -> Any:
    """A scalar node's value as Kubernetes reads it (go-yaml v2, then JSON), or ConstructorError at the node: go-yaml
    refuses the text under its tag (`!!int 1.5`), or JSON has no such number (`.inf`). A tag go-yaml does not
    resolve (`!foo x`) leaves the text, as go-yaml does."""
    tag = node.tag
    if tag not in CORE:
        return node.value
    try:
        return _scalar(tag, node.value)
    except Refused as exc:
        if tag == _BOOL:
            raise not_a_bool(node) from None
        raise ValueRefused(node, f"`{node.value}`: {exc}") from None


class ValueRefused(yaml.constructor.ConstructorError):
    """A value Kubernetes' YAML reader refuses: an input error at the value, naming its field once the reader knows
    the document (`name_field`)."""

    def __init__(self, node: yaml.Node, problem: str):
        super().__init__(None, None, problem, node.start_mark)
        self.node = node

    def name_field(self, root: yaml.Node) -> None:
        """Prefix the problem with the field that holds the value (`spec.containers[0].image`), found by identity
        under the document's root node (only when a document is refused: no cost otherwise)."""
        path = _path_to(root, self.node, "", set())
        if path:
            self.problem = f"{path}: {self.problem}"


def _path_to(node: yaml.Node, target: yaml.Node, path: str, seen: set) -> Optional[str]:
    if node is target:
        return path
    if id(node) in seen:
        return None
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found = _path_to(item, target, f"{path}[{index}]", seen)
            if found is not None:
                return found
    elif isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            try:
                name = key_name(key_node) if key_node.tag != _MERGE else ""
            except yaml.YAMLError:
                name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
            found = _path_to(value_node, target, f"{path}.{name}" if path and name else path or name, seen)
            if found is not None:
                return found
    return None


@functools.lru_cache(maxsize=4096)  # the same few numbers recur (ports, replicas, `1.0`): answered once
def _scalar(tag: str, text: str) -> Any:
    return json_value(*tagged(tag, text))


class Fallback(Exception):
    """A node this fast path leaves to PyYAML's constructor."""


class DuplicateKey(yaml.MarkedYAMLError):
    """A map that names one key twice. YAML forbids it; PyYAML keeps the last value, which would let a second
    `resources:` or `securityContext:` silently replace the first, so it is an input error with the key's line.
    Keys are compared as Kubernetes spells them: `1:` and `"1":` are one key "1" to it, and sigs.k8s.io/yaml keeps
    one of the two values at random (Go's map order; its strict mode does not notice), so that is one too."""

    def __init__(self, key: object, mark, earlier: Optional[yaml.Node] = None, later: Optional[yaml.Node] = None):
        if earlier is None or later is None or _written(earlier) == _written(later):
            problem = f"duplicate key {key!r} (the later value would silently replace the earlier)"
        else:
            problem = (f"duplicate key {key!r}: `{_written(later)}` here and `{_written(earlier)}` on line "
                       f"{earlier.start_mark.line + 1} are one key to Kubernetes (sigs.k8s.io/yaml), which keeps one "
                       f"of the two values at random")
        super().__init__(problem=problem, problem_mark=mark)


def _written(node: yaml.Node) -> str:
    quote = node.style if isinstance(node, yaml.ScalarNode) and node.style in ("'", '"') else ""
    return f"{quote}{node.value}{quote}" if isinstance(node, yaml.ScalarNode) else node.id


def _duplicate(mapping: yaml.MappingNode, key_node: yaml.Node, name: str) -> DuplicateKey:
    earlier = next(k for k, _ in mapping.value if k.tag != _MERGE and key_name(k) == name)
    return DuplicateKey(name, key_node.start_mark, earlier, key_node)


def check_duplicates(node: yaml.Node, seen: Optional[set] = None) -> None:
    """Raise DuplicateKey for the first map under `node` that repeats a key as Kubernetes spells keys (`1:` and
    `"1":` are one key to it, kept at random: Go's map order), merge keys `<<` excepted; KeyRefused for a key it
    refuses."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        names: set = set()
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE:
                name = key_name(key_node)
                if name in names:
                    raise _duplicate(node, key_node, name)
                names.add(name)
            check_duplicates(value_node, seen)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            check_duplicates(item, seen)


def construct(node: yaml.Node, fallback, aliases: bool = True) -> Any:
    """The value of `node`; `fallback(node)` builds the document with PyYAML when a node is unusual.

    `aliases=False` when the text has no anchor (no `&`), so no node can be met twice: then no alias
    bookkeeping (a third of this walk's cost).
    """
    try:
        return _value(node, {} if aliases else None)
    except Fallback:
        check_duplicates(node)
        return fallback(node)


_SCALAR, _SEQUENCE, _MAPPING = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode

# Aliases let a few hundred bytes stand for a billion nodes ("billion laughs"): construction shares them, but every
# reader after it (schema checks, CEL, JSON) walks the expansion. A document may expand to this many nodes, plus
# EXPANSION_FACTOR times the nodes it really has: anchors reused a few times (a shared env list) stay far below.
EXPANSION_BASE = 100_000
EXPANSION_FACTOR = 10


def check_expansion(root: yaml.Node) -> None:
    """ConstructorError (with the position of the worst alias-heavy node) when the document, its aliases expanded,
    would exceed the budget above, or when an alias contains itself (a structure no reader can walk to its end).

    Linear in the distinct nodes: each node's expanded size is computed once.
    """
    sizes: dict[int, int] = {}  # id(node) -> expanded size; -1 while it is being computed
    offender: list[yaml.Node] = []

    def size(node: yaml.Node) -> int:
        key = id(node)
        known = sizes.get(key)
        if known is not None:
            if known < 0:
                raise yaml.constructor.ConstructorError(
                    None, None, "recursive alias: a node contains itself", node.start_mark)
            return known
        sizes[key] = -1
        total = 1
        if type(node) is _SEQUENCE:
            for item in node.value:
                total += size(item)
        elif type(node) is _MAPPING:
            for key_node, value_node in node.value:
                total += size(key_node) + size(value_node)
        sizes[key] = total
        if total > EXPANSION_BASE and not offender:
            offender.append(node)  # the first (deepest) node over the base: where the aliases pile up
        return total

    total = size(root)
    if total > EXPANSION_BASE + EXPANSION_FACTOR * len(sizes):
        mark = (offender[0] if offender else root).start_mark
        raise yaml.constructor.ConstructorError(
            None, None, f"aliases expand this document to {total:,} nodes from {len(sizes):,} written "
                        f"(at most {EXPANSION_BASE:,} + {EXPANSION_FACTOR}x): an alias bomb?", mark)


def _value(node: yaml.Node, seen: dict | None) -> Any:
    if seen is not None and id(node) in seen:  # an alias: the same object, as PyYAML gives it
        return seen[id(node)]
    tag = node.tag
    kind = type(node)  # the composer makes exactly these classes
    if kind is _SCALAR:
        value = node.value
        if tag == _STR:
            return value
        if tag == _INT and _PLAIN_INT.match(value):
            return int(value)
        return scalar(node)
    if kind is _SEQUENCE:  # go-yaml ignores a collection's tag (`!!set`, `!!omap`, `!foo`): a list, a map
        if seen is None:  # a string item taken here, without a call (most items are)
            return [item.value if type(item) is _SCALAR and item.tag == _STR else _value(item, None)
                    for item in node.value]
        out: list = []
        seen[id(node)] = out
        out.extend(_value(item, seen) for item in node.value)
        return out
    if kind is _MAPPING:
        mapping: dict = {}
        if seen is not None:
            seen[id(node)] = mapping
        for key_node, value_node in node.value:
            tag = key_node.tag
            if tag == _STR and type(key_node) is _SCALAR:  # the common key (a string to go-yaml), without a call
                name = key_node.value
            elif tag == _MERGE:
                raise Fallback()
            else:
                name = key_name(key_node)
                if name != key_node.value:
                    mark_spelt(node)
            if name in mapping:
                raise _duplicate(node, key_node, name)
            if value_node.tag == _STR and type(value_node) is _SCALAR:  # likewise a string value (never an alias)
                mapping[name] = value_node.value
            else:
                mapping[name] = _value(value_node, seen)
        return mapping
    raise Fallback()
