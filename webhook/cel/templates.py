"""A message template compiled into one Python function: what `Template.render` runs (cel/environment.py).

Why: a message with three `{{ }}` segments was rendered by three program calls, each through `Expression.run` and
its own `try:`, then a Python loop joining the pieces; for a denied GPU PyTorchJob those calls cost more than the
segments' own code (bench/RESULTS.md, 2026-12-07). Here the segments' generated statements (cel/generator.py
`generate`) stand one after the other in one function, each in its own `try:`, and the text around them is one
f-string. Each segment keeps what its own program had: its comprehension steps counted from zero, its own free
variables for the errors a named variable keeps (cel/values.py), "?" for any error of its own, its value shown by
`display`; the message is then the whole text with its whitespace runs made single spaces, as before.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Optional, Sequence

from webhook.cel import fastpaths, stored
from webhook.cel.namespace import BUILTINS, HELPERS


def display(value: Any) -> str:
    """A segment's value in a message: CEL's spelling of bools, whole doubles without `.0`, lists comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(display(v) for v in value)
    text = str(value)
    return text if type(text) is str else str.__str__(text)  # a str subclass's __str__ may answer one: its text


_FITS: dict = {}  # segment values that `fits` (a value is a str: its own hash and equality), bounded by count and size


def fits(value: str) -> bool:
    """Whether a segment's value is normal inside: not empty, printable (so its only whitespace is the space: every
    other character str.split splits on is not printable), no two spaces in a row. (What it may start or end with
    depends on where it stands: `_join`.) A value that fits, up to 256 characters, is remembered (4,096 of them at
    most): a container's, a template's or an image's name recurs in every message and every review, and the test
    is then one look-up, where `isprintable` read every character each time."""
    found = bool(value) and value.isprintable() and "  " not in value
    if found and len(value) <= 256 and len(_FITS) < 4096:
        _FITS[value] = True
    return found


def compile_template(texts: Sequence[str], segments: Sequence[tuple[str, frozenset, Optional[Mapping[str, str]]]],
                     functions: Mapping[str, Callable], cache: Any = None) -> Callable[[Mapping], str]:
    """The function rendering a message: `texts` are the n + 1 pieces of text around the n segments, each segment
    (its source with params inlined, its qualified names, its policy's named variables' sources or None).

    Unsupported (or the parser's ParseError) when a segment needs the reference library or the whole is too deep
    for Python: the caller then renders segment by segment, as each expression's own program would.
    `cache.compile(python, filename)` may answer Python's compile (language/checks.py), and
    `cache.recall_program` the whole function generated before from the same key (cel/stored.py)."""
    key = ("message", json.dumps(list(texts)), json.dumps([[source, sorted(qualified), stored.inline_key(inline)]
                                                           for source, qualified, inline in segments]),
           stored.functions_key(functions)) if getattr(cache, "keeps_programs", False) else None

    def make() -> tuple[str, dict]:
        from webhook.cel.generator import generate  # only for a message not kept before: a warm run parses nothing

        lines = ["def render(A):"]
        extras: dict[str, Any] = {}
        count = 0
        for position, (source, qualified, inline) in enumerate(segments, 1):
            free = f"_FREE{position}"
            generator, body, result = generate(source, functions, qualified, inline, count, free)
            count = generator.count
            extras.update(generator.constants)
            extras[free] = frozenset(generator.free)
            value = f"_m{position}"
            lines.extend(["    _n = 0"] if generator.counted else [])  # its own comprehension steps, from zero
            lines.extend(["    try:", *body, f"        {value} = {result}", "    except Exception:",
                          f"        {value} = '?'", f"    if type({value}) is not str: {value} = _display({value})"])
        return "\n".join(lines + _join(texts)), extras

    render, python = stored.load(cache, key, functions, BUILTINS,
                                 dict(HELPERS, **fastpaths.NAMESPACE, _display=display, _FITS=_FITS, _fits=fits),
                                 "render",
                                 f"<message {texts[0][:40]!r}>", make)
    render.python = python  # the generated source, for whoever debugs a message
    return render


def collapse(text: str) -> str:
    """`text` with each whitespace run (str.split's whitespace) made one space: the same words in any text it is
    put into, and the same runs between them, so the message made whole and normalised is the same."""
    if not text or not text.split():
        return " " if text else ""
    return (" " if text[0].isspace() else "") + " ".join(text.split()) + (" " if text[-1].isspace() else "")


def _join(texts: Sequence[str]) -> list[str]:
    """The lines returning the message: the whole text, its whitespace runs made single spaces (as
    `" ".join(whole.split())`). The text between the segments is normalised here (`collapse`; what starts the
    message and what ends it stripped, as the split drops them), so the split is needed only when a value could
    bring whitespace other than single inner spaces: where every value `fits` (not empty, printable, no two spaces
    in a row) and does not start with a space where the message starts, a text ending with a space or another value
    comes before it (nor end with one where the message ends, a text starting with a space or another value comes
    after it), no two spaces meet where a value and a text join, and the message is its own normal form. (The test
    was each value's `isprintable()` and then a search of the whole message for two spaces: ~2,900 instructions
    per message, bench/RESULTS.md, h-eval.)"""
    count = len(texts) - 1
    pieces = [collapse(texts[0]).lstrip(" ")] + [collapse(text) for text in texts[1:-1]] + \
        [collapse(texts[-1]).rstrip(" ")] if count else [" ".join(texts[0].split())]
    if not count:
        return [f"    return {pieces[0]!r}"]
    parts = [repr(pieces[0])] if pieces[0] else []
    for position, text in enumerate(pieces[1:], 1):
        parts.append(f"f'{{_m{position}}}'")
        if text:
            parts.append(repr(text))
    tests = []
    for position in range(1, count + 1):
        before, after = pieces[position - 1], pieces[position]  # "": the message's start or end, or another value
        tests.append(f"(_m{position} in _FITS or _fits(_m{position}))")
        if not before or before[-1] == " ":
            tests.append(f"_m{position}[0] != ' '")
        if not after or after[0] == " ":
            tests.append(f"_m{position}[-1] != ' '")
    return [f"    _s = {' '.join(parts)}", f"    if {' and '.join(tests)}: return _s",
            "    return ' '.join(_s.split())"]
