"""A bad policy file fails the whole set, with file, line and field for every problem."""

import os
import shutil
import textwrap

import pytest

from objects import GOOD
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError




def write(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write(textwrap.dedent(text))
    return path


def problems_for(tmp_path, text, extra_good=True):
    if extra_good:
        write(tmp_path, "a-good.yaml", GOOD.format(name="good"))
    bad = write(tmp_path, "bad.yaml", text)
    with pytest.raises(PolicyLoadError) as info:
        load_policies([str(tmp_path)])
    return bad, info.value.problems


def test_good_policy_loads(tmp_path):
    write(tmp_path, "p.yaml", GOOD.format(name="good"))
    [policy] = load_policies([str(tmp_path)])
    assert policy.id == "good" and policy.rules[0].name == "has-image"


def test_unknown_field_names_file_line_and_field(tmp_path):
    text = GOOD.format(name="bad").replace("target: container", "target: container\nseverity: high")
    bad, problems = problems_for(tmp_path, text)
    assert problems == [f"{bad}:12:1: severity: unknown field 'severity'"]


def test_wrong_enum_points_at_the_value(tmp_path):
    bad, problems = problems_for(tmp_path, GOOD.format(name="bad").replace("action: deny", "action: block"))
    assert len(problems) == 1 and problems[0].startswith(f"{bad}:8:1: action: 'block' is not one of")


def test_cel_that_does_not_compile(tmp_path):
    text = GOOD.format(name="bad").replace("has(container.image)", "has(container.image")
    bad, problems = problems_for(tmp_path, text)
    assert len(problems) == 1
    # the column is the character the parser stopped at, in the file as written (just past `has(container.image`)
    assert problems[0].startswith(f"{bad}:14:36: rules[0].expression: rule has-image: CEL does not compile")


def test_cel_in_message_that_does_not_compile(tmp_path):
    text = GOOD.format(name="bad").replace("{{container.name}}", "{{container.}}")
    bad, problems = problems_for(tmp_path, text)
    assert problems[0].startswith(f"{bad}:15:36: rules[0].message: rule has-image: CEL in message does not compile")


def test_rule_needs_exactly_one_check(tmp_path):
    text = GOOD.format(name="bad").replace("    expression: has(container.image)\n", "")
    bad, problems = problems_for(tmp_path, text)
    assert problems and all(p.startswith(f"{bad}:13:5: rules[0]:") for p in problems)


def test_invalid_schema_and_quantity_bound(tmp_path):
    text = GOOD.format(name="bad").replace(
        "    expression: has(container.image)\n",
        "    schema: {properties: {resources: {properties: {limits: {properties: {memory: "
        "{quantityMinimum: 4GB}}}}}}}\n")
    bad, problems = problems_for(tmp_path, text)
    assert problems == [f"{bad}:14:5: rules[0].schema: invalid quantity bound: '4GB' is not a Kubernetes quantity"]


def test_duplicate_ids_across_files(tmp_path):
    bad, problems = problems_for(tmp_path, GOOD.format(name="good"))
    assert problems == [f"{bad}:4:3: metadata.name: policy 'good' is already defined in "
                        f"{os.path.join(tmp_path, 'a-good.yaml')}"]


def test_yaml_syntax_error(tmp_path):
    bad, problems = problems_for(tmp_path, "apiVersion: aiadmit.dev/v1alpha1\nkind: Policy\nmetadata: [unclosed\n")
    assert len(problems) == 1 and problems[0].startswith(f"{bad}:4:1: YAML:")


def test_unknown_param_reference(tmp_path):
    text = GOOD.format(name="bad").replace(
        "    expression: has(container.image)\n",
        "    schema: {properties: {image: {minLength: \"${params.nope}\"}}}\n")
    bad, problems = problems_for(tmp_path, text)
    assert "unknown parameter 'nope'" in problems[0] and problems[0].startswith(f"{bad}:14:5:")


def test_several_problems_are_all_reported_and_nothing_loads(tmp_path):
    write(tmp_path, "one.yaml", GOOD.format(name="one").replace("target: container", "target: node"))
    write(tmp_path, "two.yaml", GOOD.format(name="two").replace("anyClasses: [ai]", "anyClasses: [gpu]"))
    with pytest.raises(PolicyLoadError) as info:
        load_policies([str(tmp_path)])
    files = sorted(os.path.basename(p.split(":")[0]) for p in info.value.problems)
    assert files == ["one.yaml", "two.yaml"]


def test_a_document_that_is_not_a_policy(tmp_path):
    bad, problems = problems_for(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert problems == [f"{bad}:2:1: kind: not a Policy document (kind 'ConfigMap')"]


def test_empty_directory(tmp_path):
    with pytest.raises(PolicyLoadError) as info:
        load_policies([str(tmp_path)])
    assert info.value.problems == ["no policy files given"]


def test_builtin_bundle_loads_and_a_broken_copy_does_not(tmp_path):
    assert load_policies([BUILTIN_POLICY_DIR])
    copy = tmp_path / "bundle"
    shutil.copytree(BUILTIN_POLICY_DIR, copy)
    with open(copy / "shm-sized.yaml", "a") as handle:
        handle.write("  - name: broken\n    op: default\n")
    with pytest.raises(PolicyLoadError):
        load_policies([str(copy)])


def test_loading_policies_never_freezes_the_garbage_collector():
    """A server reloads its policies; gc.freeze() there would keep every old engine alive for ever."""
    import gc

    before = gc.get_freeze_count()
    load_policies([BUILTIN_POLICY_DIR])
    load_policies([BUILTIN_POLICY_DIR])
    assert gc.get_freeze_count() == before
