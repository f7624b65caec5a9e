"""What `aiadmit test` prints: a table of every case in text, or the same results as JSON or JUnit XML.

Counts are of cases; the idempotency checks are counted apart; format errors (a test that does not say what it
means) are counted too and go to stderr as `file:line:col: error: message`, the form of every diagnostic.
"""

from __future__ import annotations

import json
from xml.etree import ElementTree

FORMATS = ("text", "json", "junit")


def diagnostic(error) -> str:
    """`file:line:col: error: message` (gcc/ruff style); line and column 0 when the place is a whole file."""
    return f"{error.file}:{error.line}:{error.column}: error: {error.message}"


def summary(run) -> dict:
    idempotent = run.idempotency
    return {"cases": len(run.results), "passed": run.passed, "failed": run.failed, "errors": len(run.errors),
            "idempotency": {"checked": len(idempotent), "passed": sum(r.ok for r in idempotent),
                            "failed": sum(not r.ok for r in idempotent)}}


def summary_line(run) -> str:
    counts = summary(run)
    line = f"{counts['cases']} cases: {counts['passed']} passed, {counts['failed']} failed"
    checked = counts["idempotency"]
    if checked["checked"]:
        line += f"; idempotency: {checked['checked']} resources, {checked['failed']} not idempotent"
    if counts["errors"]:
        line += f"; {counts['errors']} format error{'s' * (counts['errors'] != 1)}"
    return line


def text(run, quiet: bool = False, verbose: bool = False) -> str:
    """Failing cases with their detail, then a row per case (unless `quiet`), then the counts."""
    out = []
    for result in run.results + run.idempotency:
        if not result.ok:
            out.append(f"{result.test_file}:{result.line}: FAIL {result.name}: {result.detail}")
    rows = [] if quiet else [r for r in run.results] + [r for r in run.idempotency if verbose or not r.ok]
    if rows:
        header = ("result", "policy", "expect", "got", "resource", "case")
        table = [header] + [("ok" if r.ok else "FAIL", r.policy, r.expect, r.got, r.resource,
                             f"{r.test_file}:{r.line}") for r in rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
        if out:
            out.append("")
        out += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
                for row in table]
    out.append(summary_line(run))
    return "\n".join(out) + "\n"


def as_json(run) -> str:
    return json.dumps({"cases": [r.as_dict() for r in run.results],
                       "idempotency": [r.as_dict() for r in run.idempotency],
                       "errors": [e.as_dict() for e in run.errors],
                       "summary": summary(run)}, indent=2) + "\n"


def junit(run) -> str:
    """A <testsuite> per test file, a <testcase> per case (and per idempotency check), a format error an <error>."""
    suites: dict[str, list] = {}
    for result in run.results + run.idempotency:
        suites.setdefault(result.test_file, []).append(result)
    for error in run.errors:
        suites.setdefault(error.file, []).append(error)
    root = ElementTree.Element("testsuites", name="aiadmit test")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for name, entries in suites.items():
        suite = ElementTree.SubElement(root, "testsuite", name=name, time="0")
        counts = {"tests": len(entries), "failures": 0, "errors": 0}
        for entry in entries:
            if hasattr(entry, "ok"):
                case = ElementTree.SubElement(suite, "testcase", name=entry.name, classname=entry.policy or name,
                                              file=entry.test_file, line=str(entry.line), time="0")
                if not entry.ok:
                    counts["failures"] += 1
                    ElementTree.SubElement(case, "failure", message=entry.detail[:200], type=entry.got).text = \
                        entry.detail
            else:
                counts["errors"] += 1
                case = ElementTree.SubElement(suite, "testcase", name=f"format {entry.line}:{entry.column}",
                                              classname=name, file=entry.file, line=str(entry.line), time="0")
                ElementTree.SubElement(case, "error", message=entry.message, type="format").text = diagnostic(entry)
        suite.attrib.update({k: str(v) for k, v in counts.items()})
        for key in totals:
            totals[key] += counts[key]
    root.attrib.update({k: str(v) for k, v in totals.items()})
    ElementTree.indent(root, "  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
