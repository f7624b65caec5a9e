"""The monitoring that ships (manifests/components/monitoring, the chart's monitoring.* values): the PrometheusRule's
alerts and the Grafana dashboard's queries parse with Prometheus's own parser (tests/promrules.py), name only metrics
the running server's /metrics serves (or kube-state-metrics' and the kube-apiserver's, named below), and every alert
has its runbook in docs/operations.md. The chart's copies are checked by tests/test_manifests.py (manifests/sync.py
--check); the rendering and a server-side dry run, by tests/e2e/test_helm_chart.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from promrules import promrules  # noqa: F401  (the fixture)
from serverproc import make_review, start_server

ROOT = Path(__file__).resolve().parents[1]
COMPONENT = ROOT / "manifests" / "components" / "monitoring"
OPERATIONS = ROOT / "docs" / "operations.md"
RUNBOOKS = "https://github.com/aiadmit/aiadmit/blob/main/docs/operations.md#"
# Metrics the rules read that aiadmit does not serve, and who does. Anything else must be on aiadmit's /metrics.
EXTERNAL = {
    "kube_deployment_status_replicas_available": "kube-state-metrics",
    "kube_deployment_spec_replicas": "kube-state-metrics",
    # k8s.io/apiserver v0.37.2, pkg/admission/metrics/metrics.go: subsystem admission, name webhook_rejection_count,
    # labels name, type, operation, error_type (calling_webhook_error, ...), rejection_code
    "apiserver_admission_webhook_rejection_count": "kube-apiserver",
}


def rule_groups() -> dict:
    return yaml.safe_load((COMPONENT / "prometheusrule.yaml").read_text())["spec"]


def alerts() -> list[dict]:
    return [rule for group in rule_groups()["groups"] for rule in group["rules"]]


def dashboard() -> dict:
    return json.loads((COMPONENT / "aiadmit-dashboard.json").read_text())


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every query, with Grafana's variables replaced as Grafana interpolates them."""
    queries = []
    for panel in dashboard()["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "5m")
            expr = re.sub(r"\$(namespace|pod)\b", ".*", expr)
            assert "$" not in expr, (panel["title"], expr)
            queries.append((panel["title"], expr))
    return queries


@pytest.fixture(scope="module")
def served_metrics(tmp_path_factory) -> set[str]:
    """The sample names the real server's /metrics shows (`aiadmit serve`, one worker: every metric it declares is
    listed, with or without samples), after one validating and one mutating review."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"containers": [{"name": "c", "image": "registry.example/x:1",
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    with start_server(tmp_path_factory.mktemp("serve")) as server:
        for endpoint in ("validate", "mutate"):
            assert server.review(endpoint, make_review(pod))[0] == 200
        text = server.metrics()
    names = set()
    for line in text.splitlines():
        found = re.match(r"# TYPE (\S+) (\S+)$", line)
        if not found:
            continue
        name, kind = found.groups()
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        else:
            names.add(name)
    assert any(name.startswith("aiadmit_") for name in names), text[:2000]
    return names


def test_every_rule_parses_with_prometheus_rule_parser(promrules, tmp_path):
    answer = promrules(rule_groups(), tmp_path)
    assert answer["errors"] == []
    assert sorted(r["name"] for r in answer["rules"]) == sorted(a["alert"] for a in alerts())
    assert all(r["kind"] == "alert" and r["metrics"] for r in answer["rules"]), answer["rules"]


def test_the_parser_refuses_what_prometheus_would(promrules, tmp_path):
    """The check is not vacuous: an unbalanced expression, a bad `for` and a broken annotation template are each
    reported, as Prometheus would refuse the file at load."""
    cases = [({"alert": "A", "expr": "sum(rate(aiadmit_review_timeouts_total[5m]) > 0"}, "unclosed left parenthesis"),
             ({"alert": "B", "expr": "up == 0", "for": "5 minutes"}, 'unknown unit " minutes"'),
             ({"alert": "C", "expr": "up == 0", "annotations": {"summary": "{{ $labels.pod "}}, 'annotation "summary"'),
             ({"alert": "D", "expr": "up == 0", "labels": {"severity": "x"}, "fro": "1m"}, "field fro not found")]
    for rule, message in cases:
        errors = promrules({"groups": [{"name": "g", "rules": [rule]}]}, tmp_path)["errors"]
        assert any(message in e for e in errors), (rule, errors)


def test_rules_name_only_metrics_the_server_serves(promrules, served_metrics, tmp_path):
    for rule in promrules(rule_groups(), tmp_path)["rules"]:
        for metric in rule["metrics"]:
            assert metric in served_metrics or metric in EXTERNAL, \
                f"{rule['name']} reads {metric}, which aiadmit's /metrics does not serve: {sorted(served_metrics)}"
    for metric in EXTERNAL:
        assert not metric.startswith("aiadmit_")


def test_dashboard_queries_parse_and_name_served_metrics(promrules, served_metrics, tmp_path):
    queries = dashboard_queries()
    groups = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"aiadmit_dashboard:query_{i}", "expr": expr} for i, (_, expr) in enumerate(queries)]}]}
    answer = promrules(groups, tmp_path)
    assert answer["errors"] == []
    seen = set()
    for (title, _), rule in zip(queries, answer["rules"]):
        assert rule["metrics"], title
        for metric in rule["metrics"]:
            assert metric in served_metrics, f"panel {title!r} reads {metric}, not on aiadmit's /metrics"
            seen.add(metric)
    aiadmit_served = {m for m in served_metrics
                      if m.startswith("aiadmit_") and not m.endswith(("_sum", "_count", "_created"))}
    assert aiadmit_served <= seen | {"aiadmit_admission_duration_seconds_bucket"}, \
        f"metrics no panel shows: {sorted(aiadmit_served - seen)}"
    for variable in dashboard()["templating"]["list"][1:]:
        answer = promrules({"groups": [{"name": "v", "rules": [{"record": "v:x", "expr": re.sub(
            r"label_values\((.*), \w+\)$", r"\1", variable["query"]["query"]).replace("$namespace", ".*")}]}]},
            tmp_path)
        assert answer["errors"] == [] and set(answer["rules"][0]["metrics"]) <= served_metrics, variable


def test_dashboard_is_a_grafana_dashboard_on_a_chosen_prometheus():
    board = dashboard()
    assert board["uid"] == "aiadmit-webhook" and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"panel {panel['title']!r} overlaps another"
                cells.add((x, y))
        # every query on the data source the user picks, never a hard-coded one
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert all(t["datasource"] == panel["datasource"] for t in panel["targets"])
    assert board["templating"]["list"][0] == {**board["templating"]["list"][0], "type": "datasource",
                                              "query": "prometheus", "name": "datasource"}


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but hyphens dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            for m in re.finditer(r"^#+ (.+)$", markdown, re.M)}


def test_every_alert_has_its_runbook_in_the_operations_docs():
    text = OPERATIONS.read_text()
    anchors = _anchors(text)
    for alert in alerts():
        url = alert["annotations"]["runbook_url"]
        assert url.startswith(RUNBOOKS), url
        assert url[len(RUNBOOKS):] == alert["alert"].lower() and url[len(RUNBOOKS):] in anchors, alert["alert"]
        assert alert["labels"]["severity"] in ("critical", "warning")
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]
    # and the docs describe no alert that does not ship
    section = text.split("## Alerts and runbooks", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^### (Aiadmit\w+)$", section, re.M))
    assert documented == {a["alert"] for a in alerts()}


def test_service_monitor_scrapes_every_replica_over_verified_tls():
    (monitor,) = [d for d in yaml.safe_load_all((COMPONENT / "servicemonitor.yaml").read_text()) if d]
    service = yaml.safe_load((ROOT / "manifests" / "base" / "service.yaml").read_text())
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
    tls = endpoint["tlsConfig"]
    assert tls["serverName"] == "aiadmit.aiadmit-system.svc" and "insecureSkipVerify" not in tls
    assert tls["ca"]["secret"] == {"name": "aiadmit-tls", "key": "ca.crt"}
    assert endpoint["honorLabels"] is True  # aiadmit's own `endpoint` label (validate/mutate) wins
