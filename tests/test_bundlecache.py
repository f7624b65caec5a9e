"""A loaded bundle kept whole by the disk cache (language/bundlecache.py): the same policies as a load without any
cache; a changed file, param or code misses; a load with problems is never kept; damaged entries are misses."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from webhook.app.diskcache import DiskCache, frame
from webhook.language import bundlecache
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.checks import Checks
from webhook.language.loader import load_all, policy_files
from webhook.language.policy import PolicyLoadError

from objects import GOOD

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bundles(directory) -> list[str]:
    return sorted(os.path.join(root, name) for root, _, names in os.walk(directory / "bundle") for name in names)


def _shape(policies) -> list:
    return [(policy.id, policy.source, policy.document, policy.target, [r.name for r in policy.rules],
             [(e.source, e.compiled, sorted(e.variables), e.inline) for e in policy.expressions()])
            for policy in policies]


def test_a_kept_bundle_is_the_same_policies_and_runs_with_this_runs_checks(tmp_path):
    fresh, _ = load_all([BUILTIN_POLICY_DIR], checks=Checks())
    first = load_all([BUILTIN_POLICY_DIR], checks=Checks(DiskCache(str(tmp_path))))
    assert len(bundles(tmp_path)) == 1
    checks = Checks(DiskCache(str(tmp_path)))
    recalled = bundlecache.recall(checks.cache, bundlecache.key(policy_files([BUILTIN_POLICY_DIR]), None, None,
                                                                checks), checks)
    assert recalled is not None
    again = load_all([BUILTIN_POLICY_DIR], checks=checks)
    assert _shape(again[0]) == _shape(first[0]) == _shape(fresh)
    memos = {id(e._memo) for p in again[0] for e in p.expressions()}
    assert memos == {id(checks)}  # not a copy: the expressions compile through this run's cache
    schema_rules = [r for p in again[0] for r in p.rules if r.schema is not None]
    assert schema_rules and all(list(r.schema.errors({})) == list(o.schema.errors({}))
                                for r, o in zip(schema_rules, [r for p in fresh for r in p.rules if r.schema]))


def test_a_changed_file_or_param_misses(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(GOOD.format(name="first"))
    cache = tmp_path / "cache"
    load_all([str(policy)], checks=Checks(DiskCache(str(cache))))
    policy.write_text(GOOD.format(name="second"))
    assert [p.id for p in load_all([str(policy)], checks=Checks(DiskCache(str(cache))))[0]] == ["second"]
    checks = Checks(DiskCache(str(cache)))
    keys = {bundlecache.key([str(policy)], params, None, checks) for params in (None, {"second": {"x": 1}})}
    assert len(keys) == 2 and len(bundles(cache)) == 2


def test_a_bundle_that_does_not_load_is_never_kept(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.format(name="bad").replace("action: deny", "action: deny\nseverity: high"))
    for _ in range(2):
        with pytest.raises(PolicyLoadError):
            load_all([str(bad)], checks=Checks(DiskCache(str(tmp_path / "cache"))))
    assert bundles(tmp_path / "cache") == []


DAMAGES = ["torn", "not a pickle", "foreign pickle", "unknown class", "persistent id", "without what it vouches for",
           "a foreign vouch"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_entry_is_a_miss_and_rewritten(tmp_path, damage):
    import pickle
    fresh, _ = load_all([BUILTIN_POLICY_DIR], checks=Checks())
    load_all([BUILTIN_POLICY_DIR], checks=Checks(DiskCache(str(tmp_path))))
    (path,) = bundles(tmp_path)
    good = open(path, "rb").read()
    from webhook.language.vapload import InTree
    payload = {"torn": None, "not a pickle": b"not a pickle", "foreign pickle": pickle.dumps(([1], 2)),
               "unknown class": b"\x80\x04\x8c\x07webhook\x8c\x07Nowhere\x93.",
               "persistent id": b"\x80\x04\x8c\x05other\x94Q.",
               "without what it vouches for": pickle.dumps(([], InTree())),  # the shape kept before it carried them
               "a foreign vouch": pickle.dumps(([], InTree(), ("identity", {"Pod": "not a spec"})))}[damage]
    damaged = good[:len(good) // 2] if payload is None else frame(payload)
    with open(path, "wb") as handle:
        handle.write(damaged)
    checks = Checks(DiskCache(str(tmp_path)))
    kept_as = bundlecache.key(policy_files([BUILTIN_POLICY_DIR]), None, None, checks)
    assert bundlecache.recall(checks.cache, kept_as, checks) is None
    assert _shape(load_all([BUILTIN_POLICY_DIR], checks=checks)[0]) == _shape(fresh)
    assert bundles(tmp_path) == [path] and open(path, "rb").read() != damaged
    assert bundlecache.recall(checks.cache, kept_as, checks) is not None  # rewritten whole


def test_a_changed_module_misses(tmp_path):
    """The code's identity moves with any webhook file's size or modification time (a fresh process each)."""
    probe = ("import sys; from webhook.language import bundlecache; print(bundlecache._code_identity())")
    env = dict(os.environ, PYTHONPATH=ROOT)
    before = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    target = os.path.join(ROOT, "webhook", "language", "bundle.py")
    stat = os.stat(target)
    try:
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        after = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    finally:
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert before.stdout.strip() and before.stdout != after.stdout


def test_a_changed_policy_schema_misses(tmp_path, monkeypatch):
    """policies/policy.schema.json decides what loads and lies outside webhook/ in a checkout: it is in the key."""
    schema = tmp_path / "policy.schema.json"
    schema.write_text('{"type": "object"}')
    monkeypatch.setattr(bundlecache, "POLICY_SCHEMA_FILE", str(schema))
    checks = Checks(DiskCache(str(tmp_path / "cache")))
    files = policy_files([BUILTIN_POLICY_DIR])
    before = bundlecache.key(files, None, None, checks)
    schema.write_text('{"type": "object", "required": ["kind"]}')
    assert bundlecache.key(files, None, None, checks) != before


# A fresh process: the first writes the entry, the second is served by it (its CEL code identity and kinds table
# vouched for, neither computed: no CEL file digested, no spec built), the third computes both with no cache.
VOUCHED = """
import json, sys
from webhook.app.diskcache import DiskCache, frame
from webhook.cel import stored
from webhook.k8s import kindtable
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.checks import Checks
from webhook.language.loader import load_all
fed, specs = [], []
feed, spec = stored.feed, kindtable.template_spec
stored.feed = lambda *args: fed.append(args[1]) or feed(*args)
kindtable.template_spec = lambda *args: specs.append(1) or spec(*args)
if sys.argv[1] != "none":
    load_all([BUILTIN_POLICY_DIR], checks=Checks(DiskCache(sys.argv[1])))
computed = {"fed": len(fed), "specs": len(specs)}
table = kindtable.kind_table()


def spelt(value):  # every spec and pointer by its class and fields, all the way down
    if hasattr(value, "__dict__"):
        return [type(value).__name__, {name: spelt(field) for name, field in vars(value).items()}]
    if isinstance(value, (tuple, list)):
        return [spelt(item) for item in value]
    return value


frozen = all(isinstance(spec, kindtable.Frozen) and all(isinstance(t, kindtable.Frozen) for t in spec.templates)
             for spec in table.values())
print(json.dumps(dict(computed, identity=stored.identity(), frozen=frozen,
                      table=[[list(key), spelt(spec)] for key, spec in table.items()])))
"""


def _vouched(argument: str) -> dict:
    import json
    run = subprocess.run([sys.executable, "-c", VOUCHED, argument], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    return json.loads(run.stdout)


def test_a_kept_bundle_vouches_for_the_cel_code_identity_and_the_kinds_table(tmp_path):
    first, served, alone = _vouched(str(tmp_path)), _vouched(str(tmp_path)), _vouched("none")
    assert first["fed"] > 0 and first["specs"] > 0  # a load that keeps the bundle computes both, to keep them
    assert served["fed"] == served["specs"] == 0  # read back with the bundle
    assert served["identity"] == first["identity"] == alone["identity"]
    assert served["table"] == first["table"] == alone["table"] and served["frozen"]
