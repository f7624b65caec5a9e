"""The command line's disk cache: the same programs and the same load errors, fewer compiles and checks, never an
error of its own."""

import json
import marshal
import os
import subprocess
import sys

import pytest

from webhook.language.checks import Checks
from webhook.language.config import ConfigError, load_config
from webhook.app.diskcache import HEADER, DiskCache, default_directory, frame
from webhook.cel import stored
from webhook.cel.environment import FUNCTIONS, Activation
from webhook.cel.compiler import BUILTINS, compile_native
from webhook.cel.runtime import UInt
from webhook.cel.values import Variables
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.loader import load_policies
from webhook.language.policy import PolicyLoadError

from objects import GOOD
from packagecopy import entries, run_copy

from testdata import CORPUS  # tests/data/corpus, in the repository

EXPRESSIONS = [
    ("container.resources.limits['nvidia.com/gpu'] > 0",
     {"container": {"resources": {"limits": {"nvidia.com/gpu": 2}}}}, True),
    ("pod.volumes.exists(v, v.name == 'dshm' && has(v.emptyDir.sizeLimit))",
     {"pod": {"volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}, False),
    ("[1, 2, 3].map(x, x * 2)", {}, [2, 4, 6]),
    ("quantity('1Gi').isGreaterThan(quantity('512Mi'))", {}, True),
]


def test_a_second_compile_is_read_back_and_behaves_the_same(tmp_path):
    first = DiskCache(str(tmp_path))
    programs = [compile_native(source, FUNCTIONS, first) for source, _, _ in EXPRESSIONS]
    assert (first.hits, first.misses) == (0, len(EXPRESSIONS))
    assert len(entries(tmp_path / "code")) == len(entries(tmp_path / "program")) == len(EXPRESSIONS)

    second = DiskCache(str(tmp_path))
    again = [compile_native(source, FUNCTIONS, second) for source, _, _ in EXPRESSIONS]
    assert (second.hits, second.misses) == (len(EXPRESSIONS), 0)
    for (source, variables, expected), old, new in zip(EXPRESSIONS, programs, again):
        assert old.execute(dict(variables)) == new.execute(dict(variables)) == expected, source


def test_a_changed_expression_misses(tmp_path):
    cache = DiskCache(str(tmp_path))
    compile_native("1 + 1 == 2", FUNCTIONS, cache)
    program = compile_native("1 + 1 == 3", FUNCTIONS, cache)
    assert (cache.hits, cache.misses) == (0, 2)
    assert program.execute({}) is False


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
@pytest.mark.parametrize("kind", ["code", "program"])
def test_a_damaged_entry_is_made_again_and_rewritten(tmp_path, damage, kind):
    source, variables, expected = EXPRESSIONS[1]
    compile_native(source, FUNCTIONS, DiskCache(str(tmp_path)))
    [path] = entries(tmp_path / kind)
    data = open(path, "rb").read()
    damaged = {"truncate": data[: len(data) // 2], "flip": data[:-1] + bytes([data[-1] ^ 0xFF]), "empty": b""}[damage]
    open(path, "wb").write(damaged)
    if kind == "code":  # a kept program is never compiled again: without it the damaged code is read
        [program_entry] = entries(tmp_path / "program")
        os.remove(program_entry)

    cache = DiskCache(str(tmp_path))
    program = compile_native(source, FUNCTIONS, cache)
    # a damaged program is generated again, its code read from the cache; damaged code is compiled again
    assert (cache.hits, cache.misses) == ((0, 1) if kind == "code" else (1, 0))
    assert program.execute(dict(variables)) == expected
    assert open(path, "rb").read() == data  # rewritten whole
    assert DiskCache(str(tmp_path)).compile(program.python, f"<cel {source[:60]!r}>") is not None
    again = DiskCache(str(tmp_path))
    assert compile_native(source, FUNCTIONS, again).execute(dict(variables)) == expected
    assert (again.hits, again.misses) == (1, 0)  # the program read back whole


def test_a_foreign_program_entry_is_a_miss(tmp_path):
    # Entries whose digest matches but whose content is not a program this compiler wrote (another shape, a name no
    # table holds, data where a code object belongs): each is generated again, and the program behaves.
    source, variables, expected = EXPRESSIONS[3]
    compile_native(source, FUNCTIONS, DiskCache(str(tmp_path)))
    [path] = entries(tmp_path / "program")
    python, code, extras = marshal.loads(open(path, "rb").read()[HEADER:])
    named = tuple((name, "n", "f:no-such-function") if tag == "n" else (name, tag, value)
                  for name, tag, value in extras)
    assert named != extras  # the program holds a function by name
    for payload in (marshal.dumps(("x",)), marshal.dumps(42), marshal.dumps((python, code, named)),
                    marshal.dumps((python, "not code", extras)), marshal.dumps((python, code, ((1, "?", 2),)))):
        open(path, "wb").write(frame(payload))
        cache = DiskCache(str(tmp_path))
        program = compile_native(source, FUNCTIONS, cache)
        assert program.execute(dict(variables)) == expected
        assert cache.misses == 0  # generated again, Python's compile answered by the cache
        assert marshal.loads(open(path, "rb").read()[HEADER:])[2] == extras  # rewritten with what was generated


def test_a_changed_inlined_variable_or_qualified_name_misses(tmp_path):
    cache = DiskCache(str(tmp_path))
    for value in ("1", "2", "1"):
        program = compile_native("variables.a + 1", FUNCTIONS, cache, inline={"a": value})
        context = Activation()
        context["variables"] = Variables({}, context)
        assert program.execute(context) == int(value) + 1
    assert (cache.hits, cache.misses) == (1, 2)
    compile_native("a.b", FUNCTIONS, cache)
    assert compile_native("a.b", FUNCTIONS, cache, frozenset({"a.b"})).execute({"a.b": 7}) == 7
    assert (cache.hits, cache.misses) == (1, 4)


def test_a_program_with_a_constant_that_cannot_be_kept_is_not_kept():
    code = compile("x = 1", "<test>", "exec")
    assert stored.encode("x = 1", code, {"k1": lambda value: value}, FUNCTIONS, BUILTINS) is None
    assert stored.encode("x = 1", code, {"k1": UInt(3)}, FUNCTIONS, BUILTINS) is None  # marshal would read an int
    kept = stored.encode("x = 1", code, {"k1": FUNCTIONS["quantity"], "k2": [1, {"a": None}]}, FUNCTIONS, BUILTINS)
    python, again, extras = stored.decode(kept, FUNCTIONS, BUILTINS)
    assert extras == {"k1": FUNCTIONS["quantity"], "k2": [1, {"a": None}]} and again == code


def test_the_webhook_keeps_and_loads_no_program():
    # A server's checks have no cache: every program it runs is generated in the process (app/diskcache.py).
    checks = Checks()
    assert checks.recall_program("any", "key") is None
    checks.remember_program("any", "key", data=b"")
    program = compile_native("1 + 1", FUNCTIONS, checks)
    assert program.execute({}) == 2


PYTORCHJOB = os.path.join(CORPUS, "kubeflow__training-operator", "examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml")


def test_a_changed_compiler_misses(tmp_path):
    # A copy of the package whose compiler differs by a comment, and one whose quantity code (read by generated
    # programs' constants) does: each generates every program again into the same cache, with the same report.
    runs = []
    for change in (None, "cel/compiler.py", "model/quantity.py"):
        run, added = run_copy(tmp_path, change, ["-m", "webhook", "audit", PYTORCHJOB], "program")
        runs.append((run.returncode, run.stdout, added))
    assert runs[0][2] > 0 and runs[1][2] == runs[0][2] == runs[2][2], runs  # every program generated again
    assert runs[0][:2] == runs[1][:2] == runs[2][:2] and "1 denied" in runs[0][1]


def test_an_unwritable_cache_turns_itself_off_without_an_error(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    cache = DiskCache(str(blocker / "cel"))
    programs = [compile_native(source, FUNCTIONS, cache) for source, _, _ in EXPRESSIONS]
    assert cache.enabled is False
    for (source, variables, expected), program in zip(EXPRESSIONS, programs):
        assert program.execute(dict(variables)) == expected, source


def test_where_the_cache_lives(monkeypatch, tmp_path):
    monkeypatch.setenv("AIADMIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("AIADMIT_NO_CACHE", raising=False)
    directory = default_directory()
    assert os.path.dirname(directory) == str(tmp_path)
    assert os.path.basename(directory).startswith("cpython-")  # per bytecode version: another Python misses
    monkeypatch.delenv("AIADMIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_directory().startswith(str(tmp_path / "xdg" / "aiadmit"))
    monkeypatch.setenv("AIADMIT_NO_CACHE", "1")
    assert default_directory() is None


def _audit(cache_dir, **extra):
    env = dict(os.environ, AIADMIT_CACHE_DIR=str(cache_dir))
    env.pop("AIADMIT_NO_CACHE", None)
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "webhook", "audit", "-f", "sarif", "--jobs", "1", CORPUS],
                          capture_output=True, text=True, timeout=300, env=env)


def test_the_command_line_fills_the_cache_and_reports_the_same_with_it(tmp_path):
    cold = _audit(tmp_path)
    stored = entries(tmp_path)
    warm = _audit(tmp_path)
    assert cold.returncode == warm.returncode == 2  # the corpus holds one unparseable file
    assert "Traceback" not in cold.stderr + warm.stderr
    assert stored and entries(tmp_path) == stored  # the warm run compiled nothing new
    assert len(cold.stdout) > 256 * 1024  # far more than a pipe holds: the whole report was flushed before exit
    assert warm.stdout == cold.stdout
    json.loads(warm.stdout)
    uncached = _audit(tmp_path / "unused", AIADMIT_NO_CACHE="1")
    assert uncached.stdout == cold.stdout
    assert not os.path.exists(tmp_path / "unused")


@pytest.fixture
def active_cache(tmp_path):
    """The checks a command-line run hands down: the bundle's record and a disk cache of its own."""
    return Checks(DiskCache(str(tmp_path / "cache")))


# the policy loader tests' good policy, its CEL made unlike any of the bundle's (whose checks are on record anyway)
GOOD_POLICY = GOOD.format(name="cached").replace(
    "has(container.image)", "has(container.image) && size(container.image) > 0").replace(
    "{{container.name}}", "{{container.name + '!'}}")


def test_a_policy_that_passed_its_checks_is_not_checked_again_but_a_changed_one_is(tmp_path, active_cache):
    policy = tmp_path / "policy.yaml"
    policy.write_text(GOOD_POLICY)
    assert [p.id for p in load_policies([str(policy)], checks=active_cache)] == ["cached"]
    recorded = entries(tmp_path / "cache" / "known")
    assert len(recorded) == 1  # the document's schema check (aiadmit's CEL checker is fast: nothing to remember)
    [again] = load_policies([str(policy)], checks=active_cache)
    assert entries(tmp_path / "cache" / "known") == recorded  # answered from the cache: nothing new recorded
    assert again.rules[0].expression.variables == frozenset({"container"})  # what the checker found

    policy.write_text(GOOD_POLICY.replace("action: deny", "action: deny\nseverity: high"))  # an unknown field
    with pytest.raises(PolicyLoadError) as raised:
        load_policies([str(policy)], checks=active_cache)
    assert raised.value.problems == [f"{policy}:9:1: severity: unknown field 'severity'"]
    assert entries(tmp_path / "cache" / "known") == recorded  # a failure is never recorded

    policy.write_text(GOOD_POLICY.replace("has(container.image)", "has(container.image) &&"))  # not CEL
    with pytest.raises(PolicyLoadError) as raised:
        load_policies([str(policy)], checks=active_cache)
    [problem] = raised.value.problems
    assert problem.startswith(f"{policy}:14:41: rules[0].expression: rule has-image: CEL does not compile")
    assert "expected an expression, found '&&'" in problem  # at the second `&&`, as written


def test_a_config_error_is_reported_whatever_passed_before(tmp_path, active_cache):
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\ncontextFailure: deny\n")
    assert load_config(str(config), checks=active_cache).context_failure == "deny"
    assert load_config(str(config), checks=active_cache).context_failure == "deny"  # from the cache, same result
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\ncontextFailure: maybe\n")
    with pytest.raises(ConfigError) as raised:
        load_config(str(config), checks=active_cache)
    assert any(p.startswith(f"{config}:3:") and "contextFailure" in p for p in raised.value.problems)


def test_a_warm_cache_spares_the_command_line_loading_the_checkers(tmp_path):
    # Checking policies is what needs jsonschema and the reference CEL library; once their checks passed, an audit
    # loads neither (every built-in expression compiles natively). The policies are the bundle's, each edited, so
    # that the record of the bundle's own checks (webhook/language/record.py) does not answer for them.
    policies = tmp_path / "policies"
    policies.mkdir()
    for name in sorted(os.listdir(BUILTIN_POLICY_DIR)):
        if name.endswith(".yaml"):
            text = open(os.path.join(BUILTIN_POLICY_DIR, name), encoding="utf-8").read()
            (policies / name).write_text(text.replace("has(container.", "has( container.") + "\n")
    probe = ("import sys; from webhook.app.cli import main; main(['audit', '-f', 'json', '--policies', sys.argv[2], "
             "sys.argv[1]]); print('jsonschema' in sys.modules or 'cel.cel' in sys.modules)")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, image: b}]}\n")
    env = dict(os.environ, AIADMIT_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, "-c", probe, str(manifest), str(policies)], capture_output=True,
                           text=True, env=env, timeout=120) for _ in range(2)]
    assert [run.stdout.strip().splitlines()[-1] for run in runs] == ["True", "False"], [r.stderr for r in runs]



def test_a_frame_tells_a_torn_entry(tmp_path):
    from webhook.app.diskcache import unframe

    for payload in (b"", b"x", bytes(range(256)) * 40):
        framed = frame(payload)
        assert unframe(framed) == payload and len(framed) == HEADER + len(payload)
        assert unframe(framed[:-1]) is None and unframe(framed + b"x") is None and unframe(framed[:HEADER - 1]) is None
        if payload:
            assert unframe(framed[:HEADER] + bytes([payload[0] ^ 1]) + payload[1:]) is None
