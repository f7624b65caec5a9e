"""Globs as fnmatch reads them (model/globs.py): a pattern with no wildcard compared as text, every answer the
same as `fnmatch.fnmatchcase`'s; and a pattern compiled at its first use (model/lazyre.py)."""

import fnmatch
import re

import pytest

from webhook.model import globs
from webhook.model.lazyre import Lazy

PATTERNS = ["kube-system", "kube-*", "nvidia.com/gpu", "*.com/gpu", "amd.com/gpu", "ns?", "[ab]c", "[!a]c", "a\\b",
            "a\\*", "", "*", "?", "[", "]", "a[", "gpu.", "GPU", "x.y", "(a)", "a+", "a{2}", "^a$", "a|b", "é", "ß*"]
NAMES = ["kube-system", "kube-public", "nvidia.com/gpu", "nvidiaxcom/gpu", "amd.com/gpu", "ns1", "ns", "ac", "bc",
         "cc", "a\\b", "a\\*", "a*", "", "x", "[", "]", "a[", "gpu.", "gpu", "GPU", "x.y", "xzy", "(a)", "a", "aa",
         "^a$", "a|b", "é", "ß", "ßx", "kube-system\n", "\nkube-system"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_answer_is_fnmatchcase(pattern):
    for name in NAMES:
        assert globs.matches(name, pattern) is fnmatch.fnmatchcase(name, pattern), (name, pattern)
    assert globs.any_matches("kube-system", [pattern, "kube-system"]) is True


def test_a_plain_pattern_compiles_no_regex(monkeypatch):
    compiled = []
    real = re.compile
    monkeypatch.setattr(fnmatch, "_compile_pattern", lambda pattern: compiled.append(pattern) or real(
        fnmatch.translate(pattern)).match)
    assert globs.any_matches("kube-system", ("kube-public", "kube-system")) and compiled == []
    assert globs.matches("kube-system", "kube-*") and compiled == ["kube-*"]


def test_what_is_not_a_string_is_fnmatchs_to_refuse():
    with pytest.raises(TypeError):
        globs.matches(None, "kube-system")  # as fnmatch.fnmatchcase(None, "kube-system") raises
    with pytest.raises(TypeError):
        fnmatch.fnmatchcase(None, "kube-system")


def test_a_lazy_pattern_compiles_at_its_first_use_and_answers_as_the_pattern():
    lazy = Lazy(r"(a)(b)?", re.I)
    assert lazy._compiled is None
    assert lazy.fullmatch("AB").groups() == re.compile(r"(a)(b)?", re.I).fullmatch("AB").groups()
    first = lazy._compiled
    assert first is not None and lazy.compiled is first
    assert lazy.match("a").group(0) == "a" and lazy.search("xab").start() == 1
    assert [m.start() for m in lazy.finditer("a ab")] == [0, 2] and lazy.findall("ab") == [("a", "b")]
    assert lazy.sub("-", "xaby") == "x-y" and lazy.search("xaby", 2) is None
