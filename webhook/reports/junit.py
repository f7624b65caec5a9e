"""`--format junit`: JUnit XML, one testcase per resource and policy, for CI test dashboards.

A test suite per input file (or per cluster context); a testcase per policy
that applied to a resource, named `<policy>` with the resource as class name.
Findings at or above `--fail-on` make a <failure> (so the dashboard agrees with
the exit code), lower ones are listed in the testcase's output, skipped rules
make it <skipped> when nothing failed, and a rule that could not be evaluated
is an <error>. Unreadable input is an <error> testcase of its file.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

from .location import locate

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


def build(result, engine, fail_on: str = "deny") -> ET.Element:
    failing_actions = _FAILING.get(fail_on, ("deny",))
    suites: dict[str, list[ET.Element]] = defaultdict(list)
    for evaluation in result.evaluations:
        resource = evaluation.resource
        by_policy: dict[str, list] = defaultdict(list)
        for finding in evaluation.findings:
            by_policy[finding.policy].append(finding)
        policy_ids = list(dict.fromkeys(list(evaluation.policies) + list(by_policy)))
        for policy_id in policy_ids:
            findings = by_policy.get(policy_id, [])
            case = ET.Element("testcase", name=policy_id, classname=resource.describe(), time="0")
            errors = [f for f in findings if f.result == "error"]
            failures = [f for f in findings if f.result == "fail" and f.action in failing_actions]
            skips = [f for f in findings if f.result == "skip"]
            if errors:
                element = ET.SubElement(case, "error", message=errors[0].message, type="rule-error")
                element.text = "\n".join(_describe(f) for f in errors)
            elif failures:
                element = ET.SubElement(case, "failure", message=failures[0].message, type=failures[0].action)
                element.text = "\n".join(_describe(f) for f in failures)
            elif skips and len(skips) == len(findings):
                ET.SubElement(case, "skipped", message=skips[0].message)
            shown = errors or failures
            rest = [f for f in findings if f not in shown]
            if rest:  # below --fail-on, or beside an error: listed, not lost
                ET.SubElement(case, "system-out").text = "\n".join(_describe(f) for f in rest)
            suites[_suite_name(resource)].append(case)
    for error in result.errors:
        case = ET.Element("testcase", name="input", classname=error.file, time="0")
        ET.SubElement(case, "error", message=error.message, type="input").text = \
            f"{error.file}:{error.line}:{error.column}: {error.message}"
        suites[error.file].append(case)
    for skipped in result.skipped:
        case = ET.Element("testcase", name="input", classname=skipped.file, time="0")
        ET.SubElement(case, "skipped", message=skipped.message)
        suites[skipped.file].append(case)

    root = ET.Element("testsuites", name="aiadmit")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name, cases in suites.items():
        counts = {"tests": len(cases),
                  "failures": sum(1 for c in cases if c.find("failure") is not None),
                  "errors": sum(1 for c in cases if c.find("error") is not None),
                  "skipped": sum(1 for c in cases if c.find("skipped") is not None)}
        suite = ET.SubElement(root, "testsuite", name=name, time="0", **{k: str(v) for k, v in counts.items()})
        suite.extend(cases)
        for key in totals:
            totals[key] += counts[key]
    for key, value in totals.items():
        root.set(key, str(value))
    return root


def render(result, engine, fail_on: str = "deny", **options) -> str:
    root = build(result, engine, fail_on)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
