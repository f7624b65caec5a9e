"""`--format text`: for people. `file:line:col: ID [action] message`, then a summary."""

from __future__ import annotations

from .jsonreport import summary


def _where(finding) -> str:
    origin = finding.resource.origin
    if origin.file:
        line, column = finding.position()
        return f"{origin.file}:{line}:{column}"
    return finding.resource.describe()


def render(result, engine, **options) -> str:
    lines = []
    for error in result.errors:
        lines.append(f"{error.file}:{error.line}:{error.column}: error {error.message}")
    for skipped in result.skipped:
        lines.append(f"{skipped.file}:{skipped.line}:0: skipped {skipped.message}")
    for finding in result.findings:
        tag = finding.action if finding.result == "fail" else f"{finding.action}, {finding.result}"
        lines.append(f"{_where(finding)}: {finding.policy} [{tag}] {finding.message}")
    for note in result.notes:
        lines.append(f"note: {note}")
    counts = summary(result)
    lines.append(
        f"{counts['resources']} resources checked: {counts['deny']} deny, {counts['warn']} warn, "
        f"{counts['audit']} audit, {counts['skipped']} skipped, {counts['errors']} errors")
    return "\n".join(lines) + "\n"
