"""Diagnostics: what aiadmit says about its inputs (not its findings), in one form on one stream.

Every message about a file that could not be read, a policy that does not load, a test that does not say what it
means or a template left unchecked is printed on stderr as `file:line:col: severity: message` (gcc's and ruff's
form, which editors and CI annotations parse), severity `error` or `warning`. Line and column are 0 when the place
is a whole file. Findings stay on stdout, in the report the user asked for.
"""

from __future__ import annotations

import re
import sys

from webhook.model.lazyre import Lazy

PLACED = Lazy(r"^(?P<file>[^\n]+?):(?P<line>\d+)(?::(?P<column>\d+))?: (?P<message>.*)$", re.S)


def format_diagnostic(file: str, line: int, column: int, severity: str, message: str) -> str:
    return f"{file}:{line or 0}:{column or 0}: {severity}: {message}"


def of_input_error(error, severity: str = "error") -> str:
    """An InputError (file, line, column, message) as a diagnostic."""
    return format_diagnostic(error.file, error.line, getattr(error, "column", 0), severity, error.message)


def of_problem(problem: str, severity: str = "error") -> str:
    """A load problem written `file:line:col: message` (or without a place) as a diagnostic."""
    placed = PLACED.match(problem)
    if placed is None or " " in placed.group("file"):
        return f"{severity}: {problem}"
    return format_diagnostic(placed.group("file"), int(placed.group("line")), int(placed.group("column") or 0),
                             severity, placed.group("message"))


def emit(text: str) -> None:
    print(text, file=sys.stderr)


def of_result(result, quiet: bool = False) -> list[str]:
    """An audit's input errors (and, unless `quiet`, its skipped templates) as diagnostics for stderr."""
    out = [of_input_error(error) for error in result.errors]
    out += [] if quiet else [of_input_error(skipped, "warning") for skipped in result.skipped]
    return out
