"""The text report's hint wrapping (outputs/reports/text.py `wrap`) is textwrap's, line for line.

`wrap` is written out so that a one-file audit does not import textwrap; these compare it with textwrap on every
built-in policy's remediation, as the report joins it, and on paragraphs of words around a line's width."""

import random
import textwrap

from webhook.engine.core import Engine
from webhook.outputs.reports.text import _WIDTH, wrap


def _textwrap(paragraph: str, head: str) -> list[str]:
    return textwrap.wrap(paragraph, _WIDTH, initial_indent=head, subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)


def test_every_built_in_remediation_wraps_as_textwrap_wraps_it():
    compared = 0
    for policy in Engine.load().policies:
        paragraphs = [" ".join(p.split()) for p in (policy.remediation or "").split("\n\n") if p.strip()]
        for number, paragraph in enumerate(paragraphs):
            head = f"  {policy.id}: " if number == 0 else "    "
            assert wrap(paragraph, head) == _textwrap(paragraph, head), (policy.id, paragraph)
            compared += 1
    assert compared >= 17  # the bundle's remediations, each paragraph


def test_words_around_the_width_long_words_and_long_heads_wrap_as_textwrap_wraps_them():
    rng = random.Random(25)
    lengths = [1, 2, 3, 5, 8, 13, 40, 94, 95, 96, 97, 99, 100, 101, 150]
    for _ in range(3000):
        words = ["-" * rng.choice(lengths) if rng.random() < 0.1 else "w" * rng.choice(lengths)
                 for _ in range(rng.randint(1, 25))]
        head = rng.choice(["    ", "  shm-sized: ", "  " + "p" * rng.randint(1, 120) + ": ", ""])
        paragraph = " ".join(words)
        assert wrap(paragraph, head) == _textwrap(paragraph, head), (paragraph, head)
    assert wrap("", "  x: ") == _textwrap("", "  x: ") == []
