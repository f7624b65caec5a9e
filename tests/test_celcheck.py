"""The load-time checker (webhook/cel/checker.py): a rule that cannot be right fails the load, at the very character.

Why: an undeclared name (`has(contaner.name)`) used to load, then error on every review, and errors fail closed,
so every matching GPU pod was denied. Each built-in policy is mutated (one variable name misspelt at a time, in
`when`, `expression`, messages and mutations) and each mutant must fail to load with file:line:col of the mutated
name as the author wrote it.
"""

from __future__ import annotations

import os
import re

import pytest

from webhook.cel.environment import CelError, Expression
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.declarations import CONTAINER, for_level
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

POLICIES = sorted(name for name in os.listdir(BUILTIN_POLICY_DIR) if name.endswith(".yaml"))
_NAMES = ("container", "containerType", "pod", "podMeta", "workload", "templates", "templateDevices", "podResources",
          "cluster", "object", "template", "params", "containerName", "variables")
# a variable, not a field of one (`envFrom.variables` is a field called `variables`)
_USE = re.compile(r"(?<![.\w])(" + "|".join(_NAMES) + r")\b(?=\s*[.\[)}]|\s*(?:==|!=|\+|,|\)))")


def _expression_lines(text: str) -> list[int]:
    """0-based lines of the `rules:` and `mutations:` sections that are not comments, names or paths."""
    out, inside = [], False
    for number, line in enumerate(text.splitlines()):
        if re.match(r"^(rules|mutations):", line):
            inside = True
            continue
        if re.match(r"^\S", line):
            inside = False
        stripped = line.strip()
        if inside and stripped and not stripped.startswith("#") and not re.match(
                r"^-?\s*(name|path|action|target|op|requires|whenUnknown|classes):", stripped):
            out.append(number)
    return out


def _in_message_prose(lines: list[str], number: int, column: int) -> bool:
    """Whether (line, column) is in a message's text rather than in one of its {{ }} segments."""
    for start in range(number, -1, -1):
        key = re.match(r"^\s*-?\s*(\w+):", lines[start])
        if key:
            if key.group(1) != "message":
                return False
            before = "".join(lines[start:number]) + lines[number][:column]
            return before.count("{{") <= before.count("}}")
    return False


def _mutants(text: str):
    lines = text.splitlines(keepends=True)
    for number in _expression_lines(text):
        for found in _USE.finditer(lines[number]):
            if _in_message_prose(lines, number, found.start()):
                continue
            mutated = lines[:number] + [lines[number][:found.end()] + "Xq" + lines[number][found.end():]] + \
                lines[number + 1:]
            yield found.group(1), number + 1, found.start() + 1, "".join(mutated)


@pytest.mark.parametrize("name", POLICIES)
def test_every_misspelt_variable_of_a_builtin_policy_fails_its_load_at_the_name(tmp_path, name):
    text = open(os.path.join(BUILTIN_POLICY_DIR, name), encoding="utf-8").read()
    mutants = list(_mutants(text))
    assert mutants, f"{name}: no variable found to mutate"
    path = tmp_path / name
    for variable, line, column, mutated in mutants:
        path.write_text(mutated, encoding="utf-8")
        with pytest.raises(PolicyLoadError) as raised:
            load_policies([str(path)])
        wanted = f"{path}:{line}:{column}:"
        expected = f"{variable}Xq"
        assert any(p.startswith(wanted) and expected in p for p in raised.value.problems), (
            f"{name}: {variable} at {line}:{column} misspelt; got {raised.value.problems}")


def test_a_misspelt_field_of_aiadmits_own_variables_fails_too():
    with pytest.raises(CelError, match="workload has no field 'knd'") as raised:
        Expression('workload.knd == "Pod"', declarations=CONTAINER)
    assert raised.value.offset == 9
    with pytest.raises(CelError, match="no field 'priorityClass'"):
        Expression("has(cluster.priorityClass)", declarations=CONTAINER)


@pytest.mark.parametrize("source, offset, message", [
    ('1 + "a"', 2, "no matching overload for '+' applied to (int, string)"),
    ("has(contaner.name)", 4, "undeclared reference to 'contaner'"),
    ("container.name.startsWith(1)", 26, "startsWith() takes strings, not a int"),
    ("nosuch(container)", 0, "undeclared function 'nosuch'"),
    ('"a".charAt()', 4, "charAt() takes 1 argument(s), not 0"),
    ('container.name.matches("(?<=a)b")', 23, "invalid regular expression"),
    ("container.ports.all(p, p.containerPort)", -1, None),  # dyn: decidable only with data
    ("[1, 2].all(p, p + 1)", 16, "all() takes a bool, not a int"),
    ("pod.x", 0, "undeclared reference to 'pod'"),  # an object-level rule has no pod
])
def test_errors_decidable_without_data_fail_at_their_offset(source, offset, message):
    declarations = for_level("object") if source == "pod.x" else CONTAINER
    if message is None:
        Expression(source, declarations=declarations)
        return
    with pytest.raises(CelError) as raised:
        Expression(source, declarations=declarations)
    assert message in raised.value.message and raised.value.offset == offset, (raised.value.message,
                                                                              raised.value.offset)


def test_an_unknown_param_is_named_at_its_place_in_the_file(tmp_path):
    text = open(os.path.join(BUILTIN_POLICY_DIR, "image-digest.yaml"), encoding="utf-8").read()
    where = text.index("params.", text.index("rules:"))
    mutated = text[:where + 7] + "nope" + text[where + 7:]
    line = mutated.count("\n", 0, where) + 1
    column = where - mutated.rfind("\n", 0, where)
    path = tmp_path / "image-digest.yaml"
    path.write_text(mutated, encoding="utf-8")
    with pytest.raises(PolicyLoadError) as raised:
        load_policies([str(path)])
    assert any(p.startswith(f"{path}:{line}:{column + 7}:") and "unknown parameter 'nope" in p
               for p in raised.value.problems), raised.value.problems


def test_every_function_of_the_library_is_documented_with_its_origin():
    from webhook.cel.library import FUNCTIONS

    text = open(os.path.join(os.path.dirname(__file__), "..", "docs", "policy-language.md"), encoding="utf-8").read()
    missing = [name for name in FUNCTIONS if f"| `{name}` |" not in text]
    assert not missing, f"docs/policy-language.md does not list {missing}"
