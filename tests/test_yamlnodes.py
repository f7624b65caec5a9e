"""The fast constructor builds exactly what yaml.safe_load builds, on the corpus and on YAML's odd corners."""

import glob
import os

import pytest
import yaml

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
inf: .inf
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
    loader = yaml.CSafeLoader(text)
    try:
        out = []
        while loader.check_node():
            out.append(construct(loader.get_node(), loader.construct_document, aliases))
        return out
    finally:
        loader.dispose()


def test_odd_corners_match_safe_load():
    assert construct_all(ODD) == list(yaml.safe_load_all(ODD))
    # the same corners without the anchor, alias and merge lines, the way a text without `&` is built
    plain = ODD.replace("anchor: &a {cpu: \"1\", memory: 1Gi}\nalias: *a\nmerged:\n  <<: *a\n  cpu: \"2\"\n", "")
    assert "&" not in plain and "sexagesimal" in plain and "!!set" in plain
    assert construct_all(plain, aliases=False) == list(yaml.safe_load_all(plain))


def test_aliases_stay_shared():
    [doc] = construct_all("a: &x [1]\nb: *x\n")
    assert doc["a"] is doc["b"]


def test_corpus_matches_safe_load():
    files = [f for f in glob.glob(os.path.join(CORPUS, "**", "*.y*ml"), recursive=True) if "_unparseable" not in f]
    assert len(files) > 100
    for path in files:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        expected = list(yaml.safe_load_all(text))
        assert construct_all(text) == expected, path
        if "&" not in text:  # what sources.load_text does for a text without anchors: no alias bookkeeping
            assert construct_all(text, aliases=False) == expected, path


def test_memoised_resolution_keeps_quoting_apart():
    """The loader memoises tags by text and quoting: `yes` is a bool, `"yes"` stays a string, every time."""
    from webhook.inputs.sources import load_text

    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 'yes', b: yes, c: '1', d: 1, e: on}\n"
    for _ in range(3):
        [resource] = load_text(text, "x.yaml").resources
        assert resource.obj == yaml.safe_load(text)
        assert resource.obj["data"] == {"a": "yes", "b": True, "c": "1", "d": 1, "e": True}
