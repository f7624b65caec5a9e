"""`--format html`: one self-contained page for people who review an audit in a browser.

Everything is in the file: the style sheet, the charts (inline SVG drawn here,
no chart library) and a few lines of script that filter the findings table. A
Content-Security-Policy forbids every fetch (`default-src 'none'`), so a report
opened from a CI artifact or a mail never reaches the network, and a page that
tried would say so in the browser's console (the test renders it in headless
Chromium and checks for that).

What it shows: the totals; findings by policy, by namespace and by workload
class (stacked by action); the checklist coverage per workload (each policy that
applied: passed, failed at its action, skipped because something was unknown,
or not applicable); every finding with its place; each failing policy's
remediation once.
"""

from __future__ import annotations

import html
import time
from collections import Counter, defaultdict

from webhook.outputs.reports import fragments_of
from webhook.outputs.reports.jsonreport import summary
from webhook.outputs.reports.location import locate

ACTIONS = ("deny", "warn", "audit")
_COLOURS = {"deny": "#c62828", "warn": "#ef6c00", "audit": "#0277bd", "skip": "#9e9e9e", "error": "#6a1b9a",
            "pass": "#2e7d32"}
_CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'")


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def fragment(evaluation, engine, **options) -> dict:
    """What the page needs of one evaluation, as plain data (made where the object was evaluated)."""
    resource = evaluation.resource
    findings = []
    for finding in evaluation.findings:
        location = locate(finding)
        findings.append({"policy": finding.policy, "rule": finding.rule, "action": finding.action,
                         "result": finding.result, "message": finding.message, "where": location.short(),
                         "field": location.field})
    return {"workload": resource.describe(), "namespace": resource.namespace or "(namespace not set)",
            "classes": sorted(evaluation.classes), "policies": list(evaluation.policies),
            "evaluated": evaluation.evaluated, "findings": findings}


def _outcome(policy: str, findings: list[dict]) -> str:
    """One workload's result for one policy: the worst of its findings (fail at an action > error > skip), else pass."""
    mine = [f for f in findings if f["policy"] == policy]
    failed = [f["action"] for f in mine if f["result"] == "fail"]
    for action in ACTIONS:
        if action in failed:
            return action
    if any(f["result"] == "error" for f in mine):
        return "error"
    if any(f["result"] == "skip" for f in mine):
        return "skip"
    return "pass"


def _bars(chart_id: str, title: str, counts: dict[str, Counter]) -> str:
    """A horizontal bar chart, one bar per key stacked by action, as inline SVG."""
    rows = sorted(counts.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    if not rows:
        return f'<section class="chart" id="{chart_id}"><h2>{_e(title)}</h2><p class="none">no findings</p></section>'
    label_width, bar_width, row_height = 230, 480, 22
    largest = max(sum(c.values()) for _, c in rows) or 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{_e(title)}" '
             f'width="{label_width + bar_width + 60}" height="{row_height * len(rows) + 8}">']
    for index, (key, counter) in enumerate(rows):
        y = index * row_height + 4
        shown = key if len(key) <= 34 else key[:33] + "…"
        parts.append(f'<text x="{label_width - 6}" y="{y + 14}" text-anchor="end"><title>{_e(key)}</title>'
                     f'{_e(shown)}</text>')
        x = label_width
        for action in (*ACTIONS, "error", "skip"):
            value = counter.get(action, 0)
            if not value:
                continue
            width = max(1.0, bar_width * value / largest)
            parts.append(f'<rect class="bar {action}" x="{x:.1f}" y="{y}" width="{width:.1f}" height="{row_height - 6}" '
                         f'fill="{_COLOURS[action]}"><title>{_e(key)}: {value} {action}</title></rect>')
            x += width
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 14}">{sum(counter.values())}</text>')
    parts.append("</svg>")
    return f'<section class="chart" id="{chart_id}"><h2>{_e(title)}</h2>{"".join(parts)}</section>'


def _legend() -> str:
    items = "".join(f'<span><i style="background:{_COLOURS[k]}"></i>{k}</span>'
                    for k in (*ACTIONS, "error", "skip", "pass"))
    return f'<p class="legend">{items}</p>'


def _coverage(parts: list[dict], policy_ids: list[str]) -> str:
    """Workloads × policies: what each checklist item said about each workload."""
    header = "".join(f'<th class="policy" title="{_e(p)}"><span>{_e(p)}</span></th>' for p in policy_ids)
    rows = []
    for part in parts:
        if not part["evaluated"]:
            continue
        cells = []
        for policy in policy_ids:
            if policy not in part["policies"]:
                cells.append('<td class="na" title="not applicable">·</td>')
                continue
            outcome = _outcome(policy, part["findings"])
            mark = {"pass": "✓", "skip": "?", "error": "!"}.get(outcome, "✗")
            cells.append(f'<td class="{outcome}" title="{_e(policy)}: {outcome}">{mark}</td>')
        classes = ", ".join(part["classes"]) or "-"
        rows.append(f'<tr><th class="workload">{_e(part["workload"])}<small>{_e(classes)}</small></th>'
                    f'{"".join(cells)}</tr>')
    if not rows:
        return '<section id="coverage"><h2>Checklist coverage per workload</h2><p class="none">no workloads</p></section>'
    return ('<section id="coverage"><h2>Checklist coverage per workload</h2>'
            '<p>✓ passed · ✗ failed (colour: action) · ? skipped, something it needs is unknown (not a pass) · '
            '! could not be evaluated · <span class="na">·</span> not applicable</p>'
            f'<div class="scroll"><table class="coverage"><thead><tr><th>workload</th>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div></section>')


def _findings_table(parts: list[dict]) -> str:
    rows = []
    for part in parts:
        for f in part["findings"]:
            state = f["action"] if f["result"] == "fail" else f["result"]
            rows.append(f'<tr class="{state}" data-policy="{_e(f["policy"])}"><td>{_e(f["where"])}</td>'
                        f'<td>{_e(part["workload"])}</td><td>{_e(f["policy"])}</td>'
                        f'<td><b class="tag {state}">{_e(f["action"])}'
                        f'{"" if f["result"] == "fail" else ", " + _e(f["result"])}</b></td>'
                        f'<td>{_e(f["message"])}</td></tr>')
    return ('<section id="findings"><h2>Findings</h2>'
            '<p><label>filter <input id="filter" type="search" placeholder="policy, file, workload or text">'
            '</label> <span id="shown"></span></p>'
            '<div class="scroll"><table class="findings"><thead><tr><th>where</th><th>workload</th><th>policy</th>'
            f'<th>action</th><th>message</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div></section>')


def _hints(parts: list[dict], engine) -> str:
    failing = sorted({f["policy"] for part in parts for f in part["findings"] if f["result"] == "fail"})
    items = []
    for policy_id in failing:
        policy = engine.by_id.get(policy_id)
        if policy is not None and policy.remediation:
            items.append(f'<dt>{_e(policy_id)}</dt><dd>{_e(" ".join(policy.remediation.split()))}</dd>')
    return f'<section id="hints"><h2>How to fix</h2><dl>{"".join(items)}</dl></section>' if items else ""


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#212121;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.totals{display:flex;gap:10px;flex-wrap:wrap;margin:14px 0}.totals div{padding:8px 14px;border-radius:6px;
background:#f5f5f5}.totals b{display:block;font-size:20px}.charts{display:flex;flex-wrap:wrap;gap:8px 40px}
svg text{font-size:12px;fill:#424242}.legend span{margin-right:14px}.legend i{display:inline-block;width:11px;
height:11px;margin-right:4px;vertical-align:-1px}.scroll{overflow:auto;max-height:70vh;border:1px solid #e0e0e0}
table{border-collapse:collapse}td,th{padding:3px 7px;border-bottom:1px solid #eee;text-align:left;
vertical-align:top}thead th{position:sticky;top:0;background:#fafafa}table.coverage td{text-align:center;
font-weight:bold}th.policy{height:150px;white-space:nowrap;vertical-align:bottom}th.policy span{
writing-mode:vertical-rl;transform:rotate(180deg)}th.workload small{display:block;color:#757575;font-weight:normal}
td.pass{color:#2e7d32}td.deny{color:#fff;background:#c62828}td.warn{color:#fff;background:#ef6c00}
td.audit{color:#fff;background:#0277bd}td.skip{color:#616161;background:#eeeeee}td.error{color:#fff;
background:#6a1b9a}td.na,.na{color:#bdbdbd}.tag{padding:0 5px;border-radius:3px;color:#fff;font-weight:normal}
.tag.deny{background:#c62828}.tag.warn{background:#ef6c00}.tag.audit{background:#0277bd}.tag.skip{
background:#9e9e9e}.tag.error{background:#6a1b9a}dt{font-weight:bold;margin-top:8px}dd{margin-left:18px}
.none{color:#757575}
"""

_SCRIPT = """
(function () {
  var input = document.getElementById("filter"), rows = document.querySelectorAll("table.findings tbody tr");
  var shown = document.getElementById("shown");
  function apply() {
    var q = input.value.toLowerCase(), n = 0;
    rows.forEach(function (row) {
      var hit = !q || row.textContent.toLowerCase().indexOf(q) >= 0;
      row.style.display = hit ? "" : "none";
      n += hit ? 1 : 0;
    });
    shown.textContent = n + " of " + rows.length + " shown";
  }
  input.addEventListener("input", apply);
  apply();
  document.body.setAttribute("data-ready", "1");
})();
"""


def render(result, engine, fragments=None, now=None, **options) -> str:
    parts = fragments_of(fragment, result, engine, fragments, options)
    counts = summary(result)
    by_policy: dict[str, Counter] = defaultdict(Counter)
    by_namespace: dict[str, Counter] = defaultdict(Counter)
    by_class: dict[str, Counter] = defaultdict(Counter)
    for part in parts:
        for f in part["findings"]:
            state = f["action"] if f["result"] == "fail" else f["result"]
            by_policy[f["policy"]][state] += 1
            by_namespace[part["namespace"]][state] += 1
            for workload_class in part["classes"] or ["(none)"]:
                by_class[workload_class][state] += 1
    policy_ids = sorted({p for part in parts for p in part["policies"]})
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now if now is not None else time.time()))
    totals = "".join(f'<div class="{key}"><b>{counts[key]}</b>{label}</div>' for key, label in (
        ("resources", "resources checked"), ("deny", "deny"), ("warn", "warn"), ("audit", "audit"),
        ("skipped", "skipped (unknown)"), ("errors", "input errors")))
    problems = "".join(f"<li>{_e(e.file)}:{e.line}: {_e(e.message)}</li>" for e in result.errors)
    skipped = "".join(f"<li>{_e(s.file)}:{s.line}: skipped {_e(s.message)}</li>" for s in result.skipped)
    inputs = (f'<section id="input-problems"><h2>Input</h2><ul>{problems}{skipped}</ul></section>'
              if problems or skipped else "")
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>aiadmit audit report</title><style>{_STYLE}</style></head><body>",
        f'<h1>aiadmit audit report</h1><p class="none">generated {_e(stamp)}</p>',
        f'<section id="totals" class="totals">{totals}</section>', inputs, _legend(),
        '<div class="charts">',
        _bars("chart-policy", "Findings by policy", by_policy),
        _bars("chart-namespace", "Findings by namespace", by_namespace),
        _bars("chart-class", "Findings by workload class", by_class),
        "</div>", _coverage(parts, policy_ids), _hints(parts, engine), _findings_table(parts),
        f"<script>{_SCRIPT}</script></body></html>\n",
    ])
