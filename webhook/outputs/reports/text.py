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
from operator import itemgetter

from webhook.outputs.reports.jsonreport import outcome, passed_policies
from webhook.outputs.reports import fragments_of
from webhook.outputs.reports.location import Places, group_key_of

_COLOURS = {"deny": "31", "warn": "33", "audit": "36", "error": "35", "skip": "2", "dim": "2", "bold": "1"}
_WIDTH = 100


class _Paint:
    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        return f"\033[{_COLOURS[style]}m{text}\033[0m" if self.enabled else text


def fragment(evaluation, engine, color: bool = False, verbose: bool = False, quiet: bool = False,
             **options) -> tuple:
    """Everything the report says about one evaluation, in one pass over its findings:

    (the heading its findings go under, [(their place in it, their line)], {(policy, action, result): findings},
    the resource's outcome (jsonreport.outcome), [(policy, reason) of each skipped check]).

    This runs once per finding of the whole input, so what the findings of one object share (its file, its name,
    the position of a field several of them point at) is worked out once (`Places`), and the counts the table
    and the total are made of are taken in the same pass."""
    items, counts, skipped = [], {}, []
    if evaluation.findings:  # about half the objects of a corpus have none: no Places for them
        prefix = Places(evaluation.resource).prefix
        tags = _TAGS[color]
        for finding in evaluation.findings:
            policy, result = finding.policy, finding.result
            kind = (policy, finding.action, result)
            counts[kind] = counts.get(kind, 0) + 1
            if result == "skip":
                message = finding.message
                skipped.append((policy, message.split(" skipped: ", 1)[1] if " skipped: " in message else message))
                if not verbose or quiet:
                    continue
            elif quiet and result not in ("fail", "error"):
                continue
            line, column, where = prefix(finding.pointer)
            tag = tags.get(kind) or _tag(color, kind)
            items.append(((line, column, policy, finding.rule), f"{where}: {policy} [{tag}] {finding.message}"))
    if verbose and evaluation.policies and not quiet:  # "passed" and "did not apply" look different
        items.append(_applied(evaluation))
    failing = {action for _, action, result in counts if result in ("fail", "error")}
    return group_key_of(evaluation.resource), items, counts, outcome(failing, evaluation.policies), skipped


_TAGS: dict[bool, dict] = {False: {}, True: {}}  # color -> (policy, action, result) -> the finding's tag


def _tag(color: bool, kind: tuple) -> str:
    """`deny`, or `warn, error` for a rule that could not be evaluated, coloured by what happened."""
    _, action, result = kind
    style, tag = (action, action) if result == "fail" else (result, f"{action}, {result}")
    painted = _TAGS[color][kind] = _Paint(color)(tag, style)
    return painted


def _applied(evaluation) -> tuple[tuple, str]:
    """`where: Kind ns/name: passed a, b (applied: a, b, c)`, placed at the object's first line."""
    resource = evaluation.resource
    line, column = resource.origin.position("") if resource.origin.located else (0, 0)
    where = f"{resource.origin.file}:{line}:{column}" if resource.origin.file and line else \
        (resource.origin.file or resource.origin.cluster or "")
    passed = passed_policies(evaluation)
    return ((line, column, "", ""), f"{where}: {resource.describe()}: passed {', '.join(passed) or 'none'} "
                                     f"(applied: {', '.join(evaluation.policies)})")


def render(result, engine, fragments=None, **options) -> str:
    return "".join(pieces(result, engine, fragments=fragments, **options))


def pieces(result, engine, fragments=None, color: bool = False, verbose: bool = False, quiet: bool = False,
           **options) -> list[str]:
    """The report as pieces of text that together are `render`'s (see `_runs`), for the command to write."""
    paint = _Paint(color)
    lines: list[str] = []  # input errors and skipped templates are diagnostics, on stderr

    groups: dict[str, list] = defaultdict(list)
    totals: dict[tuple, int] = {}  # (policy, action, result) -> findings
    resources: dict[str, int] = {}  # policy -> resources it found something on
    outcomes: Counter = Counter()
    skipped: list = []
    made = fragments_of(fragment, result, engine, fragments, dict(options, color=color, verbose=verbose, quiet=quiet))
    for heading, items, counts, outcome_, skips in made:  # plain dicts: Counter.update costs ~10x per call
        if items:
            groups[heading] += items
        if counts:
            for kind, count in counts.items():
                totals[kind] = totals.get(kind, 0) + count
            for policy in {policy for policy, _, _ in counts}:
                resources[policy] = resources.get(policy, 0) + 1
        outcomes[outcome_] += 1
        if skips:
            skipped += skips
    for heading, items in groups.items():
        if not quiet:
            lines.append(paint(heading, "bold"))
        items.sort(key=_PLACE)  # line order within a file; stable for equal places
        lines += map(_TEXT, items)
        if not quiet:
            lines.append("")
    if quiet:
        return _runs(lines)

    lines += _hints(totals, engine, paint)
    lines += _table(totals, resources, paint)
    lines += _skips(skipped, verbose)
    for note in result.notes:
        lines.append(f"note: {note}")
    shown = {action: sum(n for (_, done, outcome_), n in totals.items() if done == action and outcome_ != "skip")
             for action in ("deny", "warn", "audit")}
    lines.append(
        f"{len(made)} resources checked ({outcomes['denied']} denied, {outcomes['warned']} warned, "
        f"{outcomes['audited']} audit only, {outcomes['passed']} passed, {outcomes['unchecked']} no policy applied); "
        f"findings: {shown['deny']} deny, {shown['warn']} warn, {shown['audit']} audit, "
        f"{sum(n for (_, _, outcome_), n in totals.items() if outcome_ == 'skip')} skipped "
        f"({sum(n for (_, _, outcome_), n in totals.items() if outcome_ == 'error')} could not be evaluated); "
        f"{len(result.errors)} input errors")
    return _runs(lines)


def _runs(lines: list[str]) -> list[str]:
    """`"\n".join(lines) + "\n"` (nothing for no lines) in pieces: each run of ASCII lines one piece, and each
    other line one. A single line with `×` or `é` makes a whole report string non-ASCII, which UTF-8 encoding then
    copies character by character (25 M instructions for the corpus x10's 2.5 MB); an ASCII piece is one copy."""
    out, start = [], 0
    for index, line in enumerate(lines):
        if not line.isascii():
            if start < index:
                out.append("\n".join(lines[start:index]) + "\n")
            out.append(line + "\n")
            start = index + 1
    if start < len(lines):
        out.append("\n".join(lines[start:]) + "\n")
    return out

_PLACE, _TEXT = itemgetter(0), itemgetter(1)


def _hints(totals: dict, engine, paint) -> list[str]:
    """Each failing policy's remediation, once and whole, wrapped for a terminal."""
    failing = sorted({policy for policy, _, outcome_ in totals if outcome_ == "fail"})
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


def _skips(skipped: list, verbose: bool) -> list[str]:
    """One line for every check that could not run (cluster facts unknown, ...), by policy and reason."""
    if not skipped:
        return []
    parts = [f"{policy} {count}× ({reason})" for (policy, reason), count in sorted(Counter(skipped).items())]
    more = "" if verbose else "; --verbose lists them"
    return [f"{len(skipped)} check(s) skipped (unknown, not passed): {', '.join(parts)}{more}"]


def _table(totals: dict, resources: dict, paint) -> list[str]:
    """One row per policy that produced something: action, failures, skips, errors, resources affected."""
    rows: dict[str, dict] = {}
    for (policy, action, outcome_), count in totals.items():
        row = rows.get(policy)
        if row is None:
            row = rows[policy] = {"action": set(), "fail": 0, "skip": 0, "error": 0}
        row["action"].add(action)
        row[outcome_] += count
    if not rows:
        return []
    width = max(len("policy"), *(len(p) for p in rows))
    out = [paint(f"{'policy':<{width}}  {'action':<11}  {'fail':>5}  {'skip':>5}  {'error':>5}  {'resources':>9}",
                 "bold")]
    for policy in sorted(rows):
        row = rows[policy]
        action = ",".join(sorted(row["action"]))
        out.append(f"{policy:<{width}}  {action:<11}  {row['fail']:>5}  {row['skip']:>5}  {row['error']:>5}  "
                   f"{resources[policy]:>9}")
    out.append("")
    return out
