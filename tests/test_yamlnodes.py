"""The fast constructor builds exactly what the loader's PyYAML constructor builds (both read values as Kubernetes
does: webhook/model/goyaml.py, compared with Kubernetes itself in tests/test_yaml_plain.py), on the corpus and on
YAML's odd corners."""

import glob
import os

import pytest
import yaml

from webhook.inputs.sources import _Loader
from webhook.inputs.yamlnodes import construct

from testdata import CORPUS  # tests/data/corpus, in the repository

ODD = """\
plain: text
quoted: "0755"
octal: 0755
hex: 0x1F
underscored: 1_000
sexagesimal: 1:30
negative: -12
float: 1.5e3
inf: .5e1
bools: [yes, No, TRUE, off, on]
nulls: [~, null, ]
date: 2026-11-29
stamp: 2026-11-29T16:00:00Z
anchor: &a {cpu: "1", memory: 1Gi}
alias: *a
merged:
  <<: *a
  cpu: "2"
binary: !!binary aGVsbG8=
set: !!set {a, b}
multi: |
  line one
  line two
"""


def construct_all(text, aliases=True):
    loader = _Loader(text)
    try:
        out = []
        while loader.check_node():
            out.append(construct(loader.get_node(), loader.construct_document, aliases))
        return out
    finally:
        loader.dispose()


def pyyaml_all(text):
    """Every document as the loader's PyYAML constructor builds it (the path of a document with a merge key)."""
    return list(yaml.load_all(text, Loader=_Loader))


def test_odd_corners_match_the_pyyaml_constructor():
    assert construct_all(ODD) == pyyaml_all(ODD)
    # the same corners without the anchor, alias and merge lines, the way a text without `&` is built
    plain = ODD.replace("anchor: &a {cpu: \"1\", memory: 1Gi}\nalias: *a\nmerged:\n  <<: *a\n  cpu: \"2\"\n", "")
    assert "&" not in plain and "sexagesimal" in plain and "!!set" in plain
    assert construct_all(plain, aliases=False) == pyyaml_all(plain)


def test_aliases_stay_shared():
    [doc] = construct_all("a: &x [1]\nb: *x\n")
    assert doc["a"] is doc["b"]


def test_corpus_matches_the_pyyaml_constructor():
    files = [f for f in glob.glob(os.path.join(CORPUS, "**", "*.y*ml"), recursive=True) if "_unparseable" not in f]
    assert len(files) > 100
    for path in files:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        expected = pyyaml_all(text)
        assert construct_all(text) == expected == list(yaml.safe_load_all(text)), path  # none of go-yaml's edges
        if "&" not in text:  # what sources.load_text does for a text without anchors: no alias bookkeeping
            assert construct_all(text, aliases=False) == expected, path


def test_memoised_resolution_keeps_quoting_apart():
    """The loader memoises tags by text and quoting: `yes` is a bool, `"yes"` stays a string, every time."""
    from webhook.inputs.sources import load_text

    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 'yes', b: yes, c: '1', d: 1, e: on}\n"
    for _ in range(3):
        [resource] = load_text(text, "x.yaml").resources
        assert resource.obj["data"] == {"a": "yes", "b": True, "c": "1", "d": 1, "e": True}


def test_memoised_loader_matches_the_pyyaml_constructor_on_the_corpus_and_odd_corners():
    """sources.load_text (libyaml with the resolver memo and no path hooks) gives what the loader's PyYAML
    constructor gives, document by document, on the corpus read in one process (so the memo is warm across files)."""
    from webhook.inputs.sources import load_text

    files = [f for f in glob.glob(os.path.join(CORPUS, "**", "*.y*ml"), recursive=True) if "_unparseable" not in f]
    texts = ["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: odd}\n" + ODD]  # every odd corner, as an object
    for path in files:
        with open(path, encoding="utf-8") as handle:
            texts.append(handle.read())
    for _ in range(2):  # second pass: every scalar's tag answered by the memo
        for text in texts:
            wrapped = [d for d in pyyaml_all(text) if isinstance(d, dict) and "kind" in d
                       and "apiVersion" in d and isinstance(d["kind"], str) and not d["kind"].endswith("List")]
            got = [r.obj for r in load_text(text, "x.yaml").resources]
            assert got == wrapped
    [odd] = load_text(texts[0], "odd.yaml").resources  # YAML 1.1 as go-yaml reads it: booleans, octal, quoting
    assert odd.obj["bools"] == [True, False, True, False, True]
    assert (odd.obj["octal"], odd.obj["quoted"], odd.obj["sexagesimal"], odd.obj["inf"]) == (493, "0755", "1:30", 5)
    assert (odd.obj["date"], odd.obj["set"], odd.obj["binary"]) == ("2026-11-29", {"a": None, "b": None}, "hello")


def test_resolver_memo_is_bounded():
    from webhook.inputs import sources

    for index in range(5000):
        sources.load_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x{index}}}\n", "x.yaml")
    assert sources._Loader.resolve.cache_info().currsize <= 4096
    big = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {a: " + "x" * (sources._MEMO_TEXT + 1) + "}\n"
    sources.load_text(big, "big.yaml")  # more text than the memo may keep alive: it starts again empty
    assert sources._Loader.resolve.cache_info().currsize < 20
