"""`--format junit`: JUnit XML, one testcase per resource and policy, for CI test dashboards.

A test suite per input file (or per cluster context); a testcase per policy
that applied to a resource, named `<policy>` with the resource as class name.
Findings at or above `--fail-on` make a <failure> (so the dashboard agrees with
the exit code), lower ones are listed in the testcase's output, skipped rules
make it <skipped> when nothing failed, and a rule that could not be evaluated
is an <error>. Unreadable input is an <error> testcase of its file.
"""

from __future__ import annotations

from collections import defaultdict
from xml.etree import ElementTree

from webhook.outputs.reports import fragments_of
from webhook.outputs.reports.location import locate

_FAILING = {"deny": ("deny",), "warn": ("deny", "warn"), "never": ()}


def _suite_name(resource) -> str:
    origin = resource.origin
    if origin.cluster is not None:
        return f"cluster {origin.cluster}"
    return origin.file or "<input>"


def _describe(finding) -> str:
    location = locate(finding)
    where = f"{location.file}:{location.line}:{location.column}" if location.line and not location.from_stdin \
        else location.short()
    return f"{where}: {finding.policy}/{finding.rule} [{finding.action}, {finding.result}] {finding.message}" \
           + (f" (at {location.field})" if location.field else "")


def _child(tag: str, attributes: dict, text: str | None = None) -> tuple:
    """A testcase child as plain data (a fragment crosses from the worker that made it): (tag, attributes, text)."""
    return tag, attributes, text


def _policy_case(policy_id: str, resource, findings: list, failing_actions: tuple) -> tuple:
    """((name, classname, children), outcome: failure|error|skipped|"") of one policy on one resource."""
    errors = [f for f in findings if f.result == "error"]
    failures = [f for f in findings if f.result == "fail" and f.action in failing_actions]
    skips = [f for f in findings if f.result == "skip"]
    children, outcome = [], ""
    if errors:
        outcome = "error"
        children.append(_child("error", {"message": errors[0].message, "type": "rule-error"},
                               "\n".join(_describe(f) for f in errors)))
    elif failures:
        outcome = "failure"
        children.append(_child("failure", {"message": failures[0].message, "type": failures[0].action},
                               "\n".join(_describe(f) for f in failures)))
    elif skips and len(skips) == len(findings):
        outcome = "skipped"
        children.append(_child("skipped", {"message": skips[0].message}))
    shown = {id(f) for f in errors or failures}  # by identity: two findings may be equal field for field
    rest = [f for f in findings if id(f) not in shown]
    if rest:  # below --fail-on, or beside an error: listed, not lost
        children.append(_child("system-out", {}, "\n".join(_describe(f) for f in rest)))
    return (policy_id, resource.describe(), children), outcome


def fragment(evaluation, engine, fail_on: str = "deny", **options) -> tuple[str, list[tuple]]:
    """(the suite the evaluation's testcases go in, [(testcase, outcome)]): one per policy that applied."""
    failing_actions = _FAILING.get(fail_on, ("deny",))
    resource = evaluation.resource
    by_policy: dict[str, list] = defaultdict(list)
    for finding in evaluation.findings:
        by_policy[finding.policy].append(finding)
    policy_ids = list(dict.fromkeys(list(evaluation.policies) + list(by_policy)))
    return _suite_name(resource), [_policy_case(p, resource, by_policy.get(p, []), failing_actions)
                                   for p in policy_ids]


def render(result, engine, fragments=None, fail_on: str = "deny", **options) -> str:
    """The JUnit document, built with ElementTree from every fragment's testcases."""
    suites: dict[str, list[tuple]] = defaultdict(list)
    for name, cases in fragments_of(fragment, result, engine, fragments, dict(options, fail_on=fail_on)):
        if cases:
            suites[name] += cases
    for error in result.errors:
        suites[error.file].append(((("input", error.file, [_child(
            "error", {"message": error.message, "type": "input"},
            f"{error.file}:{error.line}:{error.column}: {error.message}")])), "error"))
    for skipped in result.skipped:
        suites[skipped.file].append((("input", skipped.file, [_child("skipped", {"message": skipped.message})]),
                                     "skipped"))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    root = ElementTree.Element("testsuites", name="aiadmit")
    for name, cases in suites.items():
        outcomes = [outcome for _, outcome in cases]
        counts = {"tests": len(cases), "failures": outcomes.count("failure"), "errors": outcomes.count("error"),
                  "skipped": outcomes.count("skipped")}
        suite = ElementTree.SubElement(root, "testsuite", name=name, time="0", **{k: str(v) for k, v in counts.items()})
        for (case_name, classname, children), _ in cases:
            case = ElementTree.SubElement(suite, "testcase", name=case_name, classname=classname, time="0")
            for tag, attributes, text in children:
                ElementTree.SubElement(case, tag, attributes).text = text
        for key in totals:
            totals[key] += counts[key]
    root.attrib.update({k: str(v) for k, v in totals.items()})
    ElementTree.indent(root, "  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
