"""The built-in policies read like a ValidatingAdmissionPolicy: no sub-expression is written twice in a policy.

The issue that asked for `variables` measured the same join repeated 2 to 8 times per policy, and messages that
recompute their rule to say what failed. A sub-expression worth naming (two or more operations: calls, operators,
conditionals, indexing, literals of lists or maps) that occurs twice anywhere in one policy -- rules, `when`s,
variables, messages, mutations -- is a `variables` entry waiting to be written. Field paths (`pod.spec.x`) and
single operations (`has(x)`) may repeat.
"""

from __future__ import annotations

import glob
import os
import re
from collections import Counter

import pytest
import yaml

from webhook.cel.parser import parse

POLICIES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "policies")
_OPERATIONS = frozenset({"call", "binary", "and", "or", "cond", "not", "neg", "index", "list", "map"})
_TEMPLATE = re.compile(r"\{\{(.*?)\}\}", re.S)
# Policies not yet rewritten with variables (none since 2026-12-01; a listed policy with no repeats fails the test,
# so the list only shrinks).
PENDING: frozenset = frozenset()


def sources(document: dict) -> list[str]:
    """Every CEL source of a policy document, as its author wrote it."""
    found: list[str] = []
    for variable in document.get("variables") or []:
        found.append(variable["expression"])
    for item in (document.get("rules") or []) + (document.get("mutations") or []):
        for key in ("expression", "when", "messageExpression", "value"):
            if isinstance(item.get(key), str):
                found.append(item[key])
        if isinstance(item.get("message"), str):
            found += _TEMPLATE.findall(item["message"])
    return found


def _walk(node, out: Counter) -> int:
    """Count every subtree with two or more operations into `out`; returns the operations of `node`."""
    if not isinstance(node, tuple) or not node or not isinstance(node[0], str):
        if isinstance(node, (tuple, list)):
            return sum(_walk(item, out) for item in node)
        return 0
    operations = (node[0] in _OPERATIONS) + sum(_walk(item, out) for item in node[1:])
    if operations >= 2:
        out[repr(node)] += 1
    return operations


def repeats(document: dict) -> list[str]:
    """The largest sub-expressions written more than once in this policy."""
    counts: Counter = Counter()
    for source in sources(document):
        try:
            _walk(parse(source), counts)
        except Exception:  # noqa: BLE001 - a mutation's `value` may be a plain string; the loader checks the rest
            continue
    repeated = [tree for tree, n in counts.items() if n > 1]
    # Report only the maximal ones: a repeated tree inside another repeated tree says nothing new.
    return sorted(tree for tree in repeated if not any(tree != other and tree in other for other in repeated))


def _documents():
    for path in sorted(glob.glob(os.path.join(POLICIES, "*.yaml"))):
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
        yield document["metadata"]["name"], document


@pytest.mark.parametrize("name,document", list(_documents()), ids=lambda v: v if isinstance(v, str) else "")
def test_no_sub_expression_is_written_twice(name, document):
    found = repeats(document)
    if name in PENDING:
        assert found, f"{name} has no repeated sub-expression any more: remove it from PENDING"
        return
    assert not found, f"{name} repeats {len(found)} sub-expressions; name them in `variables`:\n" + "\n".join(found)


def test_the_check_finds_a_repeat():
    document = {"rules": [{"expression": 'size(pod.containers) > 1 && x', "message": "{{size(pod.containers) > 1}}"}]}
    assert repeats(document) == [repr(parse("size(pod.containers) > 1"))]
    assert repeats({"rules": [{"expression": "has(pod.x) && has(pod.y)", "when": "has(pod.x)"}]}) == []
