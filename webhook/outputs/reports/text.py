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

    (the heading its findings go under, [(their place in it, their line)], {policy: {(action, result): findings}},
    the resource's outcome (jsonreport.outcome), [(policy, reason) of each skipped check]).

    This runs once per finding of the whole input, so what the findings of one object share (its file, its name,
    the position of a field several of them point at) is worked out once (`Places`), and the counts the table
    and the total are made of are taken in the same pass."""
    prefix = Places(evaluation.resource).prefix
    tags = _TAGS[color]
    items, counts, skipped = [], {}, []
    for finding in evaluation.findings:
        policy, result = finding.policy, finding.result
        state = (finding.action, result)
        per = counts.get(policy)
        if per is None:
            per = counts[policy] = {}
        per[state] = per.get(state, 0) + 1
        if result == "skip":
            message = finding.message
            skipped.append((policy, message.split(" skipped: ", 1)[1] if " skipped: " in message else message))
            if not verbose or quiet:
                continue
        elif quiet and result not in ("fail", "error"):
            continue
        line, column, where = prefix(finding.pointer)
        tag = tags.get(state) or _tag(color, *state)
        items.append(((line, column, policy, finding.rule), f"{where}: {policy} [{tag}] {finding.message}"))
    if verbose and evaluation.policies and not quiet:  # "passed" and "did not apply" look different
        items.append(_applied(evaluation))
    failing = {action for per in counts.values() for action, result in per if result in ("fail", "error")}
    return group_key_of(evaluation.resource), items, counts, outcome(failing, evaluation.policies), skipped


_TAGS: dict[bool, dict] = {False: {}, True: {}}  # color -> (action, result) -> the finding's tag, painted or not


def _tag(color: bool, action: str, result: str) -> str:
    """`deny`, or `warn, error` for a rule that could not be evaluated, coloured by what happened."""
    style, tag = (action, action) if result == "fail" else (result, f"{action}, {result}")
    painted = _TAGS[color][action, result] = _Paint(color)(tag, style)
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


def render(result, engine, fragments=None, color: bool = False, verbose: bool = False, quiet: bool = False,
           **options) -> str:
    paint = _Paint(color)
    lines: list[str] = []  # input errors and skipped templates are diagnostics, on stderr

    groups: dict[str, list] = defaultdict(list)
    totals: dict[str, dict] = {}  # policy -> (action, result) -> findings
    resources: dict[str, int] = {}  # policy -> resources it found something on
    outcomes: Counter = Counter()
    skipped: list = []
    made = fragments_of(fragment, result, engine, fragments, dict(options, color=color, verbose=verbose, quiet=quiet))
    for heading, items, counts, outcome_, skips in made:  # plain dicts: Counter.update costs ~10x per call
        if items:
            groups[heading] += items
        for policy, per in counts.items():
            total = totals.get(policy)
            if total is None:
                totals[policy], resources[policy] = dict(per), 1
                continue
            resources[policy] += 1
            for state, count in per.items():
                total[state] = total.get(state, 0) + count
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
        return "".join(line + "\n" for line in lines)

    lines += _hints(totals, engine, paint)
    lines += _table(totals, resources, paint)
    lines += _skips(skipped, verbose)
    for note in result.notes:
        lines.append(f"note: {note}")
    found = Counter()  # (action, result) -> findings
    for per in totals.values():
        found.update(per)
    shown = {action: sum(n for (done, outcome_), n in found.items() if done == action and outcome_ != "skip")
             for action in ("deny", "warn", "audit")}
    lines.append(
        f"{len(made)} resources checked ({outcomes['denied']} denied, {outcomes['warned']} warned, "
        f"{outcomes['audited']} audit only, {outcomes['passed']} passed, {outcomes['unchecked']} no policy applied); "
        f"findings: {shown['deny']} deny, {shown['warn']} warn, {shown['audit']} audit, "
        f"{sum(n for (_, outcome_), n in found.items() if outcome_ == 'skip')} skipped "
        f"({sum(n for (_, outcome_), n in found.items() if outcome_ == 'error')} could not be evaluated); "
        f"{len(result.errors)} input errors")
    return "\n".join(lines) + "\n"


_PLACE, _TEXT = itemgetter(0), itemgetter(1)


def _hints(totals: dict, engine, paint) -> list[str]:
    """Each failing policy's remediation, once and whole, wrapped for a terminal."""
    failing = sorted(policy for policy, per in totals.items() if any(outcome_ == "fail" for _, outcome_ in per))
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
    if not totals:
        return []
    width = max(len("policy"), *(len(p) for p in totals))
    out = [paint(f"{'policy':<{width}}  {'action':<11}  {'fail':>5}  {'skip':>5}  {'error':>5}  {'resources':>9}",
                 "bold")]
    for policy in sorted(totals):
        per = totals[policy]
        counts = Counter()
        for (_, outcome_), n in per.items():
            counts[outcome_] += n
        action = ",".join(sorted({action for action, _ in per}))
        out.append(f"{policy:<{width}}  {action:<11}  {counts['fail']:>5}  {counts['skip']:>5}  "
                   f"{counts['error']:>5}  {resources[policy]:>9}")
    out.append("")
    return out
