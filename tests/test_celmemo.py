"""What the CEL checker found, replayed from the command line's disk cache (language/celmemo.py): the same
answers as a fresh check, never for a document, parameter or code it was not found for, never for a failure."""

import json

import pytest

from webhook.app.diskcache import DiskCache
from webhook.cel.checker import Struct
from webhook.language import celmemo
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.checks import NONE, Checks
from webhook.language.config import load_config
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

from objects import GOOD

PARAM_POLICY = GOOD.format(name="memo").replace(
    "action: deny", "action: deny\nparams:\n  shortest: 3").replace(
    "expression: has(container.image)", "expression: has(container.image) && size(container.image) > params.shortest")


def _kind(kind):
    if isinstance(kind, Struct):
        return ("struct", kind.name, kind.open, tuple((k, _kind(v)) for k, v in kind.fields.items()))
    if isinstance(kind, tuple):
        return tuple(_kind(part) for part in kind)
    return kind


def _answers(policies) -> list:
    """Every expression of every policy, as the checker described it: source, variables, reference, type."""
    out = []
    for policy in policies:
        expressions = list(policy.named.values())
        for rule in policy.rules:
            expressions += [e for e in (rule.when, rule.expression) if e is not None]
            expressions += list(rule.message.expressions)
        for mutation in policy.mutations:
            expressions += [e for e in (mutation.value, mutation.when) if e is not None]
        out += [(policy.id, e.source, e.variables, e.reference, _kind(e.type), e.compiled) for e in expressions]
    return out


@pytest.fixture
def counted(monkeypatch):
    """How many expressions the checker itself checked."""
    calls = []
    real = celmemo.checked

    def checked(*args):
        calls.append(args[0])
        return real(*args)

    monkeypatch.setattr(celmemo, "checked", checked)
    return calls


def test_the_bundle_replayed_is_the_bundle_checked(tmp_path, counted):
    params = load_config(checks=NONE).params()
    fresh = _answers(load_policies([BUILTIN_POLICY_DIR], params, NONE))
    checked_fresh = len(counted)
    assert checked_fresh > 200  # every expression of the bundle
    first = _answers(load_policies([BUILTIN_POLICY_DIR], params, Checks(DiskCache(str(tmp_path)))))
    assert len(counted) == 2 * checked_fresh  # a cold cache: checked, then remembered
    replayed = _answers(load_policies([BUILTIN_POLICY_DIR], params, Checks(DiskCache(str(tmp_path)))))
    assert len(counted) == 2 * checked_fresh  # a warm one: nothing checked again
    assert fresh == first == replayed


def test_other_parameters_are_checked_afresh(tmp_path, counted):
    policy = tmp_path / "policy.yaml"
    policy.write_text(PARAM_POLICY)
    cache = str(tmp_path / "cache")
    for _ in range(2):
        [loaded] = load_policies([str(policy)], checks=Checks(DiskCache(cache)))
        assert loaded.rules[0].expression.compiled.endswith("> (3)")
    once = len(counted)
    assert once > 0
    with pytest.raises(PolicyLoadError) as raised:  # a string where the check needs a number
        load_policies([str(policy)], {"memo": {"shortest": "three"}}, Checks(DiskCache(cache)))
    assert "CEL does not compile" in raised.value.problems[0]
    assert len(counted) > once


def test_an_edited_policy_is_checked_afresh_and_a_failure_is_never_remembered(tmp_path, counted):
    policy = tmp_path / "policy.yaml"
    cache = str(tmp_path / "cache")
    policy.write_text(PARAM_POLICY)
    load_policies([str(policy)], checks=Checks(DiskCache(cache)))
    policy.write_text(PARAM_POLICY.replace("size(container.image)", "size(contaner.image)"))
    for _ in range(2):  # the second run fails exactly as the first: nothing of the failure was kept
        before = len(counted)
        with pytest.raises(PolicyLoadError) as raised:
            load_policies([str(policy)], checks=Checks(DiskCache(cache)))
        assert "contaner" in raised.value.problems[0]
        assert len(counted) > before


class _Store:
    """A cache holding whatever a test puts in it."""

    def __init__(self, data=None):
        self.data = data
        self.remembered = []

    def recall(self, *key):
        return self.data

    def remember(self, *key, data=b""):
        self.remembered.append(data)


def test_a_recorded_answer_for_another_source_is_not_replayed(counted):
    lie = json.dumps([["true", [], False, "bool"]]).encode()  # recorded for `true`, asked for something else
    memo = celmemo.PolicyChecks(Checks(_Store(lie)), {"doc": 1}, {}, None)
    variables, reference, kind = memo.checked("has(container.image)", None, None, None)
    assert counted == ["has(container.image)"] and variables == frozenset({"container"}) and kind == "bool"
    memo.finish()
    assert memo.cache.remembered == []  # a diverged document is not remembered either


def test_a_damaged_record_is_checked(counted):
    memo = celmemo.PolicyChecks(Checks(_Store(b"{not json")), {"doc": 1}, {}, None)
    assert memo.checked("1 + 1", None, None, None)[2] == "int"
    assert counted == ["1 + 1"]


def test_no_cache_no_replay_and_no_identity_no_replay(monkeypatch, counted):
    assert celmemo.PolicyChecks(Checks(), {"doc": 1}, {}, None).key is None  # the webhook: checks everything
    monkeypatch.setattr(celmemo, "code_identity", lambda: "")
    assert celmemo.PolicyChecks(Checks(_Store(b"[]")), {"doc": 1}, {}, None).key is None


def test_the_code_identity_names_the_checker():
    identity = celmemo.code_identity()
    for name in ("cel/checker.py", "cel/parser.py", "cel/cost.py", "cel/library.py", "language/declarations.py"):
        assert f"\n{name}:" in "\n" + identity, name
