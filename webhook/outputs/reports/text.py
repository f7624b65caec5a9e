"""`--format text`: for people.

Findings are grouped by file (or cluster context) in line order, each as
`file:line:col: ID [action] message` so editors and terminals can jump to it.
Then each failing policy's remediation once, in full (a hint under every
finding repeated ten sentences hundreds of times, cut mid-word, and a policy's
first sentence is not about every one of its rules). Checks that could not run
(cluster facts unknown) are one summary line unless `verbose`. A table by
policy and a one-line total close the report; the total stays the last line so
that scripts and CI logs can grep it. With `quiet` only the failing lines are
printed (failures and rules that could not be evaluated), nothing else. Input errors and skipped templates
are diagnostics, not findings: `outputs/diagnostics.of_result()` gives them as `file:line:col: severity: message` for stderr, in
every format (machine formats carry them in the report too). Colour only when the caller says
the output is a terminal (and NO_COLOR is unset): escape codes in a CI log are
noise.
"""

from __future__ import annotations

import textwrap
from collections import Counter, defaultdict

from webhook.outputs.reports.jsonreport import passed_policies, summary
from webhook.outputs.reports import fragments_of
from webhook.outputs.reports.location import group_key_of, locate

_COLOURS = {"deny": "31", "warn": "33", "audit": "36", "error": "35", "skip": "2", "dim": "2", "bold": "1"}
_WIDTH = 100


class _Paint:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        return f"\033[{_COLOURS[style]}m{text}\033[0m" if self.enabled else text


def fragment(evaluation, engine, color: bool = False, verbose: bool = False, quiet: bool = False,
             **options) -> tuple[str, list[tuple[tuple, str]]]:
    """(the heading the evaluation's findings go under, [(their place in it, their lines)])."""
    paint = _Paint(color)
    items = []
    for finding in evaluation.findings:
        if finding.result == "skip" and not verbose or quiet and finding.result not in ("fail", "error"):
            continue
        location = locate(finding)
        style = finding.action if finding.result == "fail" else finding.result
        tag = finding.action if finding.result == "fail" else f"{finding.action}, {finding.result}"
        where = location.short()
        if location.cluster is not None or location.from_stdin or not location.line:
            where += f" {location.field}" if location.field else ""
        text = f"{where}: {finding.policy} [{paint(tag, style)}] {finding.message}"
        items.append(((location.line, location.column, finding.policy, finding.rule), text))
    if verbose and evaluation.policies and not quiet:  # "passed" and "did not apply" look different
        items.append(_applied(evaluation))
    return group_key_of(evaluation.resource), items


def _applied(evaluation) -> tuple[tuple, str]:
    """`where: Kind ns/name: passed a, b (applied: a, b, c)`, placed at the object's first line."""
    resource = evaluation.resource
    line, column = resource.origin.position("") if resource.origin.located else (0, 0)
    where = f"{resource.origin.file}:{line}:{column}" if resource.origin.file and line else \
        (resource.origin.file or resource.origin.cluster or "")
    passed = passed_policies(evaluation)
    return ((line, column, "", ""), f"{where}: {resource.describe()}: passed {', '.join(passed) or 'none'} "
                                     f"(applied: {', '.join(evaluation.policies)})")


def render(result, engine, fragments=None, color: bool = False, verbose: bool = False, quiet: bool = False,
           **options) -> str:
    paint = _Paint(color)
    lines: list[str] = []  # input errors and skipped templates are diagnostics, on stderr

    groups: dict[str, list] = defaultdict(list)
    made = fragments_of(fragment, result, engine, fragments, dict(options, color=color, verbose=verbose, quiet=quiet))
    for heading, items in made:
        if items:
            groups[heading] += items
    for heading, items in groups.items():
        if not quiet:
            lines.append(paint(heading, "bold"))
        items.sort(key=lambda item: item[0])  # line order within a file; stable for equal places
        lines += [text for _, text in items]
        if not quiet:
            lines.append("")
    if quiet:
        return "".join(line + "\n" for line in lines)

    lines += _hints(result, engine, paint)
    lines += _table(result, paint)
    lines += _skips(result, verbose)
    for note in result.notes:
        lines.append(f"note: {note}")
    counts = summary(result)
    by = counts["resourcesBy"]
    lines.append(
        f"{counts['resources']} resources checked ({by['denied']} denied, {by['warned']} warned, "
        f"{by['audited']} audit only, {by['passed']} passed, {by['unchecked']} no policy applied); findings: "
        f"{counts['deny']} deny, {counts['warn']} warn, {counts['audit']} audit, {counts['skipped']} skipped "
        f"({counts['ruleErrors']} could not be evaluated); {counts['errors']} input errors")
    return "\n".join(lines) + "\n"


def _hints(result, engine, paint) -> list[str]:
    """Each failing policy's remediation, once and whole, wrapped for a terminal."""
    failing = sorted({f.policy for f in result.findings if f.result == "fail"})
    out = []
    for policy_id in failing:
        policy = engine.by_id.get(policy_id)
        if policy is None or not policy.remediation:
            continue
        paragraphs = [" ".join(p.split()) for p in policy.remediation.split("\n\n") if p.strip()]
        for number, paragraph in enumerate(paragraphs):
            head = f"  {policy_id}: " if number == 0 else "    "
            out += textwrap.wrap(paragraph, _WIDTH, initial_indent=head, subsequent_indent="    ",
                                 break_long_words=False, break_on_hyphens=False)
    if not out:
        return []
    return [paint("how to fix (each failing policy once; `aiadmit policies ID` explains it):", "bold"), *out, ""]


def _skips(result, verbose: bool) -> list[str]:
    """One line for every check that could not run (cluster facts unknown, ...), by policy and reason."""
    reasons: dict[str, Counter] = defaultdict(Counter)
    for finding in result.findings:
        if finding.result == "skip":
            message = finding.message
            reason = message.split(" skipped: ", 1)[1] if " skipped: " in message else message
            reasons[finding.policy][reason] += 1
    if not reasons:
        return []
    total = sum(sum(c.values()) for c in reasons.values())
    parts = []
    for policy in sorted(reasons):
        for reason, count in sorted(reasons[policy].items()):
            parts.append(f"{policy} {count}× ({reason})")
    more = "" if verbose else "; --verbose lists them"
    return [f"{total} check(s) skipped (unknown, not passed): {', '.join(parts)}{more}"]


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

