"""Message templates compiled into one function (webhook/cel/templates.py) render what each segment's own program
rendered: the same text, "?" for a failing segment, the same whitespace, the same errors kept by named variables."""

import sys

import pytest

from webhook.cel.environment import Expression, Template, _Reference, new_context
from webhook.cel.templates import collapse
from webhook.cel.values import Variables

SPACES = ["", " ", "  ", "\t", "\n", " \n ", "\u00a0", "\u2003", "\x1f", "\u200b"]
VALUES = ["pytorch", "", " ", "a b", "a  b", " lead", "trail ", "tab\there", "line\nbreak", "nb\u00a0sp",
          "em\u2003sp", "zero\u200bwidth", "café", True, False, 2.0, 2.5, 7, None, [1, "a", 2.0], {"k": 1}]
TEXTS = ["", " ", "container ", " (", ") image ", "  two  spaces  ", "\ttab and\nnewline ", "end"]


def _both(text: str, context: dict) -> tuple[str, str]:
    """(the compiled render, the segment-by-segment render) of `text` over `context`, each on its own context."""
    template = Template(text)
    compiled = template.render(_context(context))
    assert hasattr(template._render, "python"), f"{text!r} was not compiled into one function"
    return compiled, template._render_segments(_context(context))


def _context(values: dict):
    context = new_context()
    context.update(values)
    return context


@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("before, after", [("", ""), ("container ", " must"), (" x ", " "), ("a\t", "\nb")])
def test_one_value_renders_as_its_program_did(value, before, after):
    compiled, segments = _both(before + "{{ x }}" + after, {"x": value})
    assert compiled == segments


@pytest.mark.parametrize("first", VALUES[:13], ids=repr)
@pytest.mark.parametrize("between", TEXTS, ids=repr)
def test_two_values_and_the_text_between(first, between):
    for second in ("Master", "", " ", "x  y"):
        text = "{{ a }}" + between + "{{ b }}" + between
        compiled, segments = _both(text, {"a": first, "b": second})
        assert compiled == segments, (text, first, second)


def test_known_messages():
    context = {"c": "pytorch", "t": "Master", "n": 2.0, "l": ["a", 1], "f": True}
    assert _both("container {{ c }} ({{ t }}) must  set\n it", context)[0] == "container pytorch (Master) must set it"
    assert _both("{{ n }} of {{ l }}: {{ f }}", context)[0] == "2 of a, 1: true"
    assert _both("  {{ c }}{{ t }}  ", context)[0] == "pytorchMaster"
    assert _both("{{ c }}", {"c": " a \t b "})[0] == "a b"


def test_a_failing_segment_is_a_question_mark_and_the_others_render():
    compiled, segments = _both("{{ missing.field }} of {{ c }} and {{ 1 / z }}", {"c": "pytorch", "z": 0})
    assert compiled == segments == "? of pytorch and ?"


def test_no_segment_is_the_text_normalised():
    template = Template("  a  message\twith\n no segment ")
    assert template.render(new_context()) == "a message with no segment"


def test_collapse_keeps_the_words_and_the_runs_between_them():
    for text in TEXTS + SPACES:
        for left in ("", "x", " "):
            for right in ("", "y", " "):
                assert (left + collapse(text) + right).split() == (left + text + right).split()


def test_printable_means_no_whitespace_but_the_space():
    """What the render's fast path relies on (cel/templates.py `_join`)."""
    assert not [c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace() and c != " " and c.isprintable()]


def test_a_named_variable_fails_in_a_message_with_its_own_error():
    """The error a named variable keeps for the rest of the binding is translated with the free names of the
    segment that computed it, as its own program did ("undeclared reference", not "no such key")."""
    errors = []
    for compiled in (True, False):
        template = Template("{{ x }}: {{ variables.v }}")
        for expression in template.expressions:
            expression.inline = {"v": "y.z"}
        context = _context({"x": "a"})
        context["variables"] = variables = Variables({"v": Expression("y.z")}, context)
        rendered = template.render(context) if compiled else template._render_segments(context)
        assert rendered == "a: ?"
        errors.append(str(variables.failed["v"]))
    assert errors[0] == errors[1] == "undeclared reference to 'y'"


def test_a_segment_on_the_reference_library_renders_segment_by_segment():
    deep = "true"
    for depth in range(12):  # more nested blocks than Python allows: the reference library runs it
        deep = f"[1].all(a{depth}, {deep})"
    template = Template("{{ c }} is {{ " + deep + " }}")
    assert isinstance(template.expressions[1].program, _Reference)
    assert template.render(_context({"c": "it"})) == "it is true"
    assert template._render == template._render_segments
