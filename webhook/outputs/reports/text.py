"""`--format text`: for people.

Findings are grouped by file (or cluster context) in line order, each as
`file:line:col: ID [action] message` so editors and terminals can jump to it,
with the first sentence of the policy's remediation beneath. A table by policy
and a one-line total close the report; the total stays the last line so that
scripts and CI logs can grep it. Colour only when the caller says the output
is a terminal (and NO_COLOR is unset): escape codes in a CI log are noise.
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import lru_cache

from webhook.outputs.reports.jsonreport import summary
from webhook.outputs.reports import fragments_of
from webhook.outputs.reports.location import group_key_of, locate

_COLOURS = {"deny": "31", "warn": "33", "audit": "36", "error": "35", "skip": "2", "dim": "2", "bold": "1"}
_SENTENCE = re.compile(r"(?<=[.!?])\s")


class _Paint:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        return f"\033[{_COLOURS[style]}m{text}\033[0m" if self.enabled else text


@lru_cache(maxsize=256)  # one remediation per policy, asked for by every finding
def first_sentence(text: str, limit: int = 200) -> str:
    flat = " ".join((text or "").split())
    sentence = _SENTENCE.split(flat, maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[:limit - 1].rstrip() + "…"


def fragment(evaluation, engine, color: bool = False, **options) -> tuple[str, list[tuple[tuple, str]]]:
    """(the heading the evaluation's findings go under, [(their place in it, their lines)])."""
    paint = _Paint(color)
    items = []
    for finding in evaluation.findings:
        location = locate(finding)
        style = finding.action if finding.result == "fail" else finding.result
        tag = finding.action if finding.result == "fail" else f"{finding.action}, {finding.result}"
        where = location.short()
        if location.cluster is not None or location.from_stdin or not location.line:
            where += f" {location.field}" if location.field else ""
        text = f"{where}: {finding.policy} [{paint(tag, style)}] {finding.message}"
        policy = engine.by_id.get(finding.policy)
        if policy is not None and policy.remediation and finding.result == "fail":
            text += "\n" + paint(f"    fix: {first_sentence(policy.remediation)}", "dim")
        items.append(((location.line, location.column, finding.policy, finding.rule), text))
    return group_key_of(evaluation.resource), items


def render(result, engine, fragments=None, color: bool = False, **options) -> str:
    paint = _Paint(color)
    lines: list[str] = []
    for error in result.errors:
        where = f"{error.file}:{error.line}:{error.column}" if error.line else error.file
        lines.append(f"{where}: {paint('error', 'error')} {error.message}")
    for skipped in result.skipped:
        lines.append(f"{skipped.file}:{skipped.line}:0: {paint('skipped', 'skip')} {skipped.message}")
    if lines:
        lines.append("")

    groups: dict[str, list] = defaultdict(list)
    for heading, items in fragments_of(fragment, result, engine, fragments, dict(options, color=color)):
        if items:
            groups[heading] += items
    for heading, items in groups.items():
        lines.append(paint(heading, "bold"))
        items.sort(key=lambda item: item[0])  # line order within a file; stable for equal places
        lines += [text for _, text in items]
        lines.append("")

    lines += _table(result, paint)
    for note in result.notes:
        lines.append(f"note: {note}")
    counts = summary(result)
    lines.append(
        f"{counts['resources']} resources checked: {counts['deny']} deny, {counts['warn']} warn, "
        f"{counts['audit']} audit, {counts['skipped']} skipped, {counts['errors']} errors")
    return "\n".join(lines) + "\n"


def _table(result, paint) -> list[str]:
    """One row per policy that produced something: action, failures, skips, errors, resources affected."""
    rows: dict[str, dict] = {}
    for finding in result.findings:
        row = rows.setdefault(finding.policy, {"action": set(), "fail": 0, "skip": 0, "error": 0, "resources": set()})
        row["action"].add(finding.action)
        row[finding.result] += 1
        row["resources"].add(id(finding.resource))
    if not rows:
        return []
    width = max(len("policy"), *(len(p) for p in rows))
    out = [paint(f"{'policy':<{width}}  {'action':<11}  {'fail':>5}  {'skip':>5}  {'error':>5}  {'resources':>9}",
                 "bold")]
    for policy in sorted(rows):
        row = rows[policy]
        action = ",".join(sorted(row["action"]))
        out.append(f"{policy:<{width}}  {action:<11}  {row['fail']:>5}  {row['skip']:>5}  {row['error']:>5}  "
                   f"{len(row['resources']):>9}")
    out.append("")
    return out
