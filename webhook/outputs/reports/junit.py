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


def _text(value: str) -> str:
    """XML character data, escaped as ElementTree escapes it."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attribute(value: str) -> str:
    """An XML attribute value, quoted and escaped as ElementTree writes them."""
    value = _text(value).replace('"', "&quot;")
    return '"' + value.replace("\r", "&#13;").replace("\n", "&#10;").replace("\t", "&#09;") + '"'


def _element(tag: str, attributes: dict, text: str | None = None) -> str:
    """One element at testcase-child depth: `<tag a="..." />` or `<tag a="...">text</tag>`."""
    head = f"<{tag}" + "".join(f" {key}={_attribute(value)}" for key, value in attributes.items())
    return f"{head} />" if text is None else f"{head}>{_text(text)}</{tag}>"


def _case(name: str, classname: str, children: list[str]) -> str:
    """A testcase indented for its place in the document (inside a testsuite, inside testsuites)."""
    head = f"<testcase name={_attribute(name)} classname={_attribute(classname)} time=\"0\""
    if not children:
        return head + " />"
    return head + ">" + "".join(f"\n      {child}" for child in children) + "\n    </testcase>"


def _policy_case(policy_id: str, resource, findings: list, failing_actions: tuple) -> tuple[str, str]:
    """(testcase XML, its outcome: failure|error|skipped|"") of one policy on one resource."""
    errors = [f for f in findings if f.result == "error"]
    failures = [f for f in findings if f.result == "fail" and f.action in failing_actions]
    skips = [f for f in findings if f.result == "skip"]
    children, outcome = [], ""
    if errors:
        outcome = "error"
        children.append(_element("error", {"message": errors[0].message, "type": "rule-error"},
                                 "\n".join(_describe(f) for f in errors)))
    elif failures:
        outcome = "failure"
        children.append(_element("failure", {"message": failures[0].message, "type": failures[0].action},
                                 "\n".join(_describe(f) for f in failures)))
    elif skips and len(skips) == len(findings):
        outcome = "skipped"
        children.append(_element("skipped", {"message": skips[0].message}))
    shown = {id(f) for f in errors or failures}  # by identity: two findings may be equal field for field
    rest = [f for f in findings if id(f) not in shown]
    if rest:  # below --fail-on, or beside an error: listed, not lost
        children.append(_element("system-out", {}, "\n".join(_describe(f) for f in rest)))
    return _case(policy_id, resource.describe(), children), outcome


def fragment(evaluation, engine, fail_on: str = "deny", **options) -> tuple[str, list[tuple[str, str]]]:
    """(the suite the evaluation's testcases go in, [(testcase XML, outcome)]): one per policy that applied."""
    failing_actions = _FAILING.get(fail_on, ("deny",))
    resource = evaluation.resource
    by_policy: dict[str, list] = defaultdict(list)
    for finding in evaluation.findings:
        by_policy[finding.policy].append(finding)
    policy_ids = list(dict.fromkeys(list(evaluation.policies) + list(by_policy)))
    return _suite_name(resource), [_policy_case(p, resource, by_policy.get(p, []), failing_actions)
                                   for p in policy_ids]


def render(result, engine, fragments=None, fail_on: str = "deny", **options) -> str:
    suites: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for name, cases in fragments_of(fragment, result, engine, fragments, dict(options, fail_on=fail_on)):
        if cases:
            suites[name] += cases
    for error in result.errors:
        suites[error.file].append((_case("input", error.file, [_element(
            "error", {"message": error.message, "type": "input"},
            f"{error.file}:{error.line}:{error.column}: {error.message}")]), "error"))
    for skipped in result.skipped:
        suites[skipped.file].append((_case("input", skipped.file, [_element(
            "skipped", {"message": skipped.message})]), "skipped"))

    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    body = []
    for name, cases in suites.items():
        outcomes = [outcome for _, outcome in cases]
        counts = {"tests": len(cases), "failures": outcomes.count("failure"), "errors": outcomes.count("error"),
                  "skipped": outcomes.count("skipped")}
        attributes = " ".join(f"{key}={_attribute(str(value))}" for key, value in counts.items())
        body.append(f"  <testsuite name={_attribute(name)} time=\"0\" {attributes}>")
        body += [f"    {xml}" for xml, _ in cases]
        body.append("  </testsuite>")
        for key in totals:
            totals[key] += counts[key]
    head = " ".join(f"{key}={_attribute(str(value))}" for key, value in totals.items())
    if not body:
        return f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites name="aiadmit" {head} />\n'
    return "\n".join(['<?xml version="1.0" encoding="UTF-8"?>', f'<testsuites name="aiadmit" {head}>', *body,
                      "</testsuites>"]) + "\n"
