"""The on-disk cache of compiled CEL programs: same programs, fewer compiles, never an error of its own."""

import json
import os
import subprocess
import sys

import pytest

from webhook.celcache import CodeCache, default_directory
from webhook.celenv import FUNCTIONS
from webhook.celnative import compile_native

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpus")

EXPRESSIONS = [
    ("container.resources.limits['nvidia.com/gpu'] > 0", {"container": {"resources": {"limits": {"nvidia.com/gpu": 2}}}},
     True),
    ("pod.volumes.exists(v, v.name == 'dshm' && has(v.emptyDir.sizeLimit))",
     {"pod": {"volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}, False),
    ("[1, 2, 3].map(x, x * 2)", {}, [2, 4, 6]),
    ("quantity('1Gi').isGreaterThan(quantity('512Mi'))", {}, True),
]


def entries(directory) -> list[str]:
    return sorted(os.path.join(root, name) for root, _, names in os.walk(directory) for name in names)


def test_a_second_compile_is_read_back_and_behaves_the_same(tmp_path):
    first = CodeCache(str(tmp_path))
    programs = [compile_native(source, FUNCTIONS, first) for source, _, _ in EXPRESSIONS]
    assert (first.hits, first.misses) == (0, len(EXPRESSIONS))
    assert len(entries(tmp_path)) == len(EXPRESSIONS)

    second = CodeCache(str(tmp_path))
    again = [compile_native(source, FUNCTIONS, second) for source, _, _ in EXPRESSIONS]
    assert (second.hits, second.misses) == (len(EXPRESSIONS), 0)
    for (source, variables, expected), old, new in zip(EXPRESSIONS, programs, again):
        assert old.execute(dict(variables)) == new.execute(dict(variables)) == expected, source


def test_a_changed_expression_misses(tmp_path):
    cache = CodeCache(str(tmp_path))
    compile_native("1 + 1 == 2", FUNCTIONS, cache)
    program = compile_native("1 + 1 == 3", FUNCTIONS, cache)
    assert (cache.hits, cache.misses) == (0, 2)
    assert program.execute({}) is False


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_entry_is_compiled_again_and_rewritten(tmp_path, damage):
    source, variables, expected = EXPRESSIONS[1]
    compile_native(source, FUNCTIONS, CodeCache(str(tmp_path)))
    [path] = entries(tmp_path)
    data = open(path, "rb").read()
    damaged = {"truncate": data[: len(data) // 2], "flip": data[:-1] + bytes([data[-1] ^ 0xFF]), "empty": b""}[damage]
    open(path, "wb").write(damaged)

    cache = CodeCache(str(tmp_path))
    program = compile_native(source, FUNCTIONS, cache)
    assert (cache.hits, cache.misses) == (0, 1)
    assert program.execute(dict(variables)) == expected
    assert open(path, "rb").read() == data  # rewritten whole
    assert CodeCache(str(tmp_path)).compile(program.python, f"<cel {source[:60]!r}>") is not None


def test_an_unwritable_cache_turns_itself_off_without_an_error(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    cache = CodeCache(str(blocker / "cel"))
    programs = [compile_native(source, FUNCTIONS, cache) for source, _, _ in EXPRESSIONS]
    assert cache.enabled is False
    for (source, variables, expected), program in zip(EXPRESSIONS, programs):
        assert program.execute(dict(variables)) == expected, source


def test_where_the_cache_lives(monkeypatch, tmp_path):
    monkeypatch.setenv("AIADMIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("AIADMIT_NO_CACHE", raising=False)
    directory = default_directory()
    assert os.path.dirname(directory) == str(tmp_path)
    assert os.path.basename(directory).startswith("cel-")  # per bytecode version: another Python misses
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
