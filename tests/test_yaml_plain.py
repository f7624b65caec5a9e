"""Plain and tagged YAML values as Kubernetes reads them: go-yaml v2's YAML 1.1, then JSON, then the API server's
JSON decoder; not PyYAML's YAML 1.1.

On main `0o10`, `08` and `1e3` were strings to every rule (8, 8 and 1000 once applied), `1:30` was 90 and
`2001-12-14` a date (strings to Kubernetes), `1.0` a float (the int 1 to Kubernetes: Go's JSON writes it `1`),
`99999999999999999999` an exact int (1e+20, a float, to Kubernetes), `.inf` a number (Kubernetes refuses the
document: JSON has no infinity), `!!int 08` the int 8 (refused: go-yaml reads `08` as a float), `!foo x` and
`!!set {a}` refused or a Python set (a string and a map to Kubernetes). tests/tools/yamljson, a Go build of
sigs.k8s.io/yaml itself, is the judge, through both of aiadmit's reader paths (the node walk, and PyYAML's
constructor, which a merge key makes the reader use).
"""

from __future__ import annotations

import json

import pytest

from yamljson import aiadmit_reads, yamljson  # noqa: F401  (yamljson: the fixture)

CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: values}\ndata:\n  v: %s\n"
MERGED = CONFIGMAP + "  <<: {when: 1}\n"  # a merge key: the document is built by PyYAML's constructor instead

INTS = ["0o10", "0O10", "-0o7", "08", "09", "010", "0755", "0x1F", "0X1f", "0x_1F", "0b1010", "-0b11", "0b+101",
        "-0b0", "1_000", "1__0", "1_", "_1", "+12", "-0", "0x", "0b", "9223372036854775807", "-9223372036854775808",
        "9223372036854775808", "-9223372036854775809", "18446744073709551615", "18446744073709551616",
        "99999999999999999999", "0xFFFFFFFFFFFFFFFF", "0x10000000000000000", "0o1777777777777777777777",
        "0b" + "1" * 64, "-0b" + "1" * 63, "0" * 70 + "1", "1" * 5000]
FLOATS = ["0.", "1.0", "1.", "1e3", "-1e3", "1E5", "1.e5", "1.5e+3", ".5e1", "+.5", "-.5e3", ".5_5", "._5", ".",
          "+", "1e", "1.5", "-1.5e-7", "1e-7", "0.000001", "-0.0", "3.4e39", "1e400", "1e-400", "1e20", "1e21",
          "4.5e15", "9.223372036854775e18", "1.7976931348623157e308", "0x1p3", "1e+5_0"]
OTHERS = ["1:30", "-1:30", "1:30:00", "190:20:30.15", "2001-12-14", "2001-12-14T21:59:43Z",
          "2001-12-14 21:59:43.10", "2001-12-14t21:59:43.1-05:00", "~", "null", "Null", "NULL", "''", "=", "<<",
          "y", "&a 08", "&b 1e3", "'08'", '"1e3"', "!!str 08", "!!str 1e3", "!!str ~", "1.2.3", "0.0.0.0/0", "1-2"]
TAGGED = ['!!int "8"', "!!int 0x_1F", '!!int "0o10"', "!!float 1", '!!float "1.5"', "!!float 08", "!!null ~",
          "!!null ''", "!!timestamp 2001-12-14", "!!timestamp 2001-1-2 3:4:5", "!!timestamp 2001-12-14t21:59:43.1-05:00",
          "!!binary aGVsbG8=", "!!binary |\n    aGVs\n    bG8=", "!!binary /w==", "!!binary 4oKs/+KCrA==", "!foo bar",
          "!!merge x", "!!value =", "!<tag:yaml.org,2002:int> 010", "!!set {a, b}", "!!omap [a: 1, b: 2]",
          "!!pairs [a: 1]", "!!seq {a: 1}", "!!map [1]", "!!str {a: 1}", "!foo [1, 2]", "!!int {a: 1}",
          "[08, 1e3, 1:30, '08', ~]", "{a: 0o10, b: 2001-12-14, c: 1.0}"]
REFUSED = [".inf", "-.inf", "+.inf", ".Inf", "-.INF", ".NaN", ".nan", ".NAN", "!!float .inf", "[1, .nan]",
           "!!int 08", "!!int 1.5", "!!int 2001-12-14", "!!float 18446744073709551615", "!!float 1e400",
           "!!null x", "!!timestamp 2001-02-30", "!!timestamp 2001-12-14T21:59:43", "!!timestamp foo",
           "!!binary aGVsbG8", "!!binary a b"]


def _k8s_number(text: str):
    """An integer's JSON text as the API server's decoder reads it (apimachinery util/json `convertNumber`): an
    int64 if it is one, else a float64."""
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 63 else float(text)


def _ours(text: str) -> tuple[object, str]:
    data, error = aiadmit_reads(text, "values.yaml")
    return (None if data is None else data["v"]), error


@pytest.mark.parametrize("shape", [CONFIGMAP, MERGED], ids=["node-walk", "pyyaml-constructor"])
@pytest.mark.parametrize("forms", [INTS, FLOATS, OTHERS, TAGGED], ids=["ints", "floats", "others", "tagged"])
def test_values_are_what_kubernetes_makes_of_them(yamljson, shape, forms):
    texts = [shape % form for form in forms]
    mismatches = []
    for form, text, answer in zip(forms, texts, yamljson(texts)):
        assert not answer.get("error"), (form, answer)
        (theirs,) = answer["json"]
        theirs = json.loads(json.dumps(theirs["data"]["v"]), parse_int=_k8s_number)
        ours, error = _ours(text)
        # compared as JSON text: 1 and 1.0 differ there (an int64 and a float64 to the API server, int and double
        # to CEL), and in Python True == 1
        if error or json.dumps(ours) != json.dumps(theirs):
            mismatches.append((form, theirs, error or ours))
    assert not mismatches


@pytest.mark.parametrize("shape", [CONFIGMAP, MERGED], ids=["node-walk", "pyyaml-constructor"])
def test_values_kubernetes_refuses_are_input_errors_at_the_value(yamljson, shape):
    """kubectl and the API server refuse these documents (go-yaml: "cannot decode"; JSON: "unsupported value");
    on main `.inf` was a number, `!!int 08` the int 8, `!!null x` None and `!!timestamp foo` a traceback-free
    error only by luck of PyYAML's message."""
    texts = [shape % form for form in REFUSED]
    wrong = []
    for form, text, answer in zip(REFUSED, texts, yamljson(texts)):
        assert answer["json"] is None and answer["error"], (form, answer)
        ours, error = _ours(text)
        column = 10 if form.startswith("[") else 6
        if ours is not None or not error.startswith(f"values.yaml:5:{column}: YAML: "):
            wrong.append((form, answer["error"], error or ours))
    assert not wrong


@pytest.mark.parametrize("form, reason", [(".inf", "an infinity is no JSON number"), (".NaN", "NaN is no JSON number"),
                                          ("!!int 1.5", "cannot decode !!float `1.5` as a !!int"),
                                          ("!!null x", "cannot decode !!str `x` as a !!null")])
def test_a_refused_value_is_named_with_the_reason(form, reason):
    ours, error = _ours(CONFIGMAP % form)
    value = form.split()[-1]
    assert ours is None and error.startswith(f"values.yaml:5:6: YAML: data.v: `{value}`: {reason}")


@pytest.mark.xfail(strict=True, reason="libyaml hands the resolver a `!`-tagged plain scalar as if it were untagged, "
                                       "so `! 08` is resolved (8); go-yaml keeps the text of a `!` scalar")
def test_the_non_specific_tag_keeps_the_text(yamljson):
    (answer,) = yamljson([CONFIGMAP % "! 08"])
    assert answer["json"][0]["data"]["v"] == "08"
    assert _ours(CONFIGMAP % "! 08") == ("08", "")
