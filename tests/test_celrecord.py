"""The CEL checks of the built-in bundle, recorded when it was built (policies/checked.json `cel`, keyed by
language/celrecord.py): they answer for exactly the expressions of that bundle under the same params,
declarations, limits and checker code, and for nothing that differs by a byte."""

from __future__ import annotations

import os

import pytest

from webhook.cel import environment
from webhook.cel.checker import Struct
from webhook.engine.core import Engine
from webhook.language import celrecord
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.declarations import LEVELS
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError


@pytest.fixture
def checker_runs(monkeypatch):
    """The sources aiadmit's checker is run on (not answered by the record)."""
    runs: list[str] = []
    original = environment.checked

    def counting(source, *args):
        runs.append(source)
        return original(source, *args)

    monkeypatch.setattr(environment, "checked", counting)
    return runs


def test_the_unchanged_bundle_loads_without_running_the_checker(checker_runs):
    engine = Engine.load()
    assert len(engine.policies) == 17 and checker_runs == []


def test_an_edited_copy_with_a_misspelt_variable_is_checked_and_fails(tmp_path, checker_runs):
    text = open(os.path.join(BUILTIN_POLICY_DIR, "shm-sized.yaml"), encoding="utf-8").read()
    assert "container.volumeMounts" in text
    edited = tmp_path / "shm-sized.yaml"
    edited.write_text(text.replace("container.volumeMounts", "contaner.volumeMounts", 1))
    with pytest.raises(PolicyLoadError) as raised:
        load_policies([str(edited)])
    assert any("undeclared reference to 'contaner'" in problem for problem in raised.value.problems)
    assert any("contaner" in source for source in checker_runs)


def test_a_changed_checker_trusts_no_recorded_answer(monkeypatch, checker_runs):
    monkeypatch.setattr(celrecord, "checker_identity", lambda: "another checker")
    Engine.load()
    assert len(checker_runs) > 100


def test_the_key_digests_each_thing_the_answer_depends_on():
    base = celrecord.key("container.name == 'x'", {}, LEVELS["container"], None)
    assert base == celrecord.key("container.name == 'x'", {}, dict(LEVELS["container"]), None)
    others = [celrecord.key("container.name == 'x' ", {}, LEVELS["container"], None),
              celrecord.key("container.name == 'x'", {"a": 1}, LEVELS["container"], None),
              celrecord.key("container.name == 'x'", {}, LEVELS["pod"], None),
              celrecord.key("container.name == 'x'", {}, None, None),
              celrecord.key("container.name == 'x'", {}, dict(LEVELS["container"], variables=Struct(
                  "variables", {"a": "int"})), None)]
    assert base not in others and len(set(others)) == len(others)


def test_types_survive_the_record():
    kind = ("list", Struct("variables", {"a": ("map", "string", "dyn"), "b": Struct("x", {}, open=True)}))
    back = celrecord.decode_type(celrecord.encode_type(kind))
    assert celrecord.encode_type(back) == celrecord.encode_type(kind)
    assert isinstance(back[1], Struct) and back[1].fields["b"].open is True


def test_a_recorded_failure_replays_as_the_same_error():
    # A variable is tried at each level until one binds all it reads: the failed tries are on record too.
    from webhook.cel.environment import CelError
    with pytest.raises(CelError) as caught:
        celrecord.decode(celrecord.encode_error(CelError("undeclared reference to 'container'", 3)))
    assert (caught.value.message, caught.value.offset) == ("undeclared reference to 'container'", 3)


def _formula(source, params, declarations, limits) -> str:
    """The key as the record was built: sha256 of the JSON list of the parts, each spelt out afresh."""
    import hashlib
    import json

    from webhook.cel.cost import Limits
    limits = limits if limits is not None else Limits()
    declared = ("\0".join(f"{name}={json.dumps(celrecord.encode_type(declarations[name]), sort_keys=True)}"
                          for name in sorted(declarations)) if declarations is not None else "(any name)")
    whole = json.dumps([celrecord.checker_identity(), source, json.dumps(params, sort_keys=True, default=repr),
                        declared, json.dumps([limits.max_object_bytes, limits.per_expression, limits.min_item_bytes,
                                    limits.max_value_factor])])
    return hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()


def test_the_memoised_key_is_the_formula_whatever_the_order_of_its_parts():
    # The parts are memoised by identity across calls (a bundle interleaves a few hundred of them): any order of
    # params, declarations and limits objects, new or met before, gives the key spelt out afresh.
    from webhook.cel.cost import Limits
    params = [{}, {"a": 1, "b": ["x", "é"]}, {"q": "\u2028\"quoted\"\\"}, None]
    declarations = [LEVELS["container"], LEVELS["pod"], None,
                    dict(LEVELS["object"], variables=Struct("variables", {"a": ("list", "string")}))]
    limits = [None, Limits(), Limits(per_expression=1e9)]
    sources = ["container.name == 'x'", "'\u00e9\\n' + \"\\\"\"", "object.spec.replicas > 1"]
    for round_ in range(2):  # the second round meets every part memoised
        for index in range(len(params) * len(declarations) * len(limits)):
            p = params[index % len(params)]
            d = declarations[(index // len(params)) % len(declarations)]
            lim = limits[index % len(limits)]
            source = sources[(index + round_) % len(sources)]
            assert celrecord.key(source, p, d, lim) == _formula(source, p, d, lim)
