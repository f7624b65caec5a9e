"""Every `--format` of `aiadmit audit` on real corpus manifests: shape, coordinates, exit codes.

SARIF is validated against the published SARIF 2.1.0 schema (tests/data); JUnit
is parsed as XML; PolicyReports are read back as YAML and measured in bytes.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml
from jsonschema import Draft7Validator, FormatChecker

from webhook.app.audit import audit_paths
from webhook.engine.core import Engine
from webhook.outputs.reports import FORMATS, render
from webhook.outputs.reports.policyreport import build_reports

HERE = os.path.dirname(__file__)
from testdata import CORPUS, NO_KUBECTL, cached_kubectl  # tests/data/corpus, in the repository
SARIF_SCHEMA = os.path.join(HERE, "data", "sarif-schema-2.1.0.json")
GPU_OPERATOR = os.path.join(CORPUS, "NVIDIA__gpu-operator")
DRA_MULTI = os.path.join(CORPUS, "NVIDIA__k8s-dra-driver-gpu", "demo__specs__quickstart__v1__gpu-test1.yaml")
UNPARSEABLE = os.path.join(CORPUS, "_unparseable")


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


@pytest.fixture(scope="module")
def corpus_result(engine):
    return audit_paths(engine, [CORPUS])


def aiadmit(*args, stdin=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "webhook", *args], input=stdin, capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_every_format_renders_the_whole_corpus(engine, corpus_result):
    assert set(FORMATS) == {"text", "json", "sarif", "junit", "policyreport", "openreports", "html"}
    assert corpus_result.findings, "the corpus has findings; a report of nothing proves nothing"
    for name in FORMATS:
        assert render(name, corpus_result, engine).strip(), name


# ---------------------------------------------------------------------- SARIF
def test_sarif_of_the_corpus_validates_against_the_sarif_2_1_0_schema(engine, corpus_result):
    with open(SARIF_SCHEMA, encoding="utf-8") as handle:
        validator = Draft7Validator(json.load(handle), format_checker=FormatChecker())
    document = json.loads(render("sarif", corpus_result, engine))
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])
    # and the schema is strict enough to catch a broken log
    broken = json.loads(json.dumps(document))
    broken["runs"][0]["results"][0]["level"] = "fatal"
    assert list(validator.iter_errors(broken))


def test_sarif_carries_rule_metadata_and_line_column_locations(engine, corpus_result):
    run = json.loads(render("sarif", corpus_result, engine))["runs"][0]
    rules = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
    assert set(rules) == set(engine.by_id)
    for policy_id, rule in rules.items():
        policy = engine.by_id[policy_id]
        assert rule["shortDescription"]["text"] == policy.summary
        assert rule["help"]["text"].startswith(" ".join(policy.remediation.split())[:40])
        assert rule["properties"]["docs"] == policy.docs
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    as_json = {(f["policy"], f["rule"], f["file"], f["path"], f["resource"]["name"]): (f["line"], f["column"])
               for f in json.loads(render("json", corpus_result, engine))["findings"]}
    assert len(run["results"]) == len(corpus_result.findings)
    for result in run["results"]:
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        physical = result["locations"][0]["physicalLocation"]
        region = physical["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        key = (result["ruleId"], result["properties"]["rule"], physical["artifactLocation"]["uri"][len("file://"):],
               result["properties"]["path"], result["properties"]["resource"]["name"])
        assert as_json[key] == (region["startLine"], region["startColumn"])


def test_sarif_relative_paths_stay_relative_and_errors_are_notifications(engine, tmp_path):
    shutil.copytree(GPU_OPERATOR, tmp_path / "k8s")
    shutil.copytree(UNPARSEABLE, tmp_path / "bad")
    result = aiadmit("audit", "--format", "sarif", "k8s", "bad", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    run = json.loads(result.stdout)["runs"][0]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]}
    assert uris == {"k8s/tests__gpu-pod.yaml", "k8s/tests__plugin-test.yaml"}
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    notice = invocation["toolExecutionNotifications"][0]
    assert notice["level"] == "error" and "YAML" in notice["message"]["text"]
    assert notice["locations"][0]["physicalLocation"]["region"]["startLine"] == 37


# ---------------------------------------------------------------------- JUnit
def _cases(xml_text):
    root = ET.fromstring(xml_text)
    assert root.tag == "testsuites"
    return root, [(suite.get("name"), case) for suite in root for case in suite]


def test_junit_has_one_testcase_per_resource_and_policy(engine, corpus_result):
    root, cases = _cases(render("junit", corpus_result, engine))
    expected = sum(len(set(e.policies) | {f.policy for f in e.findings}) for e in corpus_result.evaluations)
    policy_cases = [c for _, c in cases if c.get("name") != "input"]
    assert len(policy_cases) == expected > 0
    keys = [(suite, c.get("classname"), c.get("name")) for suite, c in cases if c.get("name") != "input"]
    assert len(keys) == len(set(keys)), "a resource and policy appear twice"
    failing = {(e.resource.origin.file, e.resource.describe(), f.policy)
               for e in corpus_result.evaluations for f in e.findings if f.action == "deny" and f.result == "fail"}
    failed = {(suite, c.get("classname"), c.get("name")) for suite, c in cases if c.find("failure") is not None}
    assert failed == failing
    assert int(root.get("failures")) == len(failed)
    assert int(root.get("tests")) == len(cases)
    inputs = [c for _, c in cases if c.get("name") == "input"]
    assert len(inputs) == 1 and inputs[0].find("error") is not None  # the unparseable file


def test_junit_failures_follow_fail_on(engine, corpus_result):
    _, cases = _cases(render("junit", corpus_result, engine, fail_on="never"))
    assert not [c for _, c in cases if c.find("failure") is not None]
    listed = [c for _, c in cases if c.find("system-out") is not None]
    assert listed, "findings below --fail-on must still be listed"
    texts = "\n".join(c.find("system-out").text for c in listed)
    assert "[deny, fail]" in texts and ".yaml:" in texts


# ---------------------------------------------------------------------- PolicyReport
def test_policyreport_objects_per_namespace(engine, corpus_result):
    documents = list(yaml.safe_load_all(render("policyreport", corpus_result, engine)))
    assert documents
    names = set()
    for report in documents:
        assert report["apiVersion"] == "wgpolicyk8s.io/v1alpha2"
        assert report["kind"] in ("PolicyReport", "ClusterPolicyReport")
        assert report["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "aiadmit"
        namespace = report["metadata"].get("namespace")
        assert (report["kind"] == "PolicyReport") == bool(namespace)
        names.add((namespace, report["metadata"]["name"]))
        counts = {k: 0 for k in ("pass", "fail", "warn", "error", "skip")}
        for entry in report["results"]:
            counts[entry["result"]] += 1
            assert entry["source"] == "aiadmit" and entry["policy"] in engine.by_id
            for ref in entry["resources"]:
                assert ref.get("namespace") == namespace
        assert report["summary"] == counts
        assert len(json.dumps(report)) < 1_572_864
    assert len(names) == len(documents)
    namespaces = {r["metadata"].get("namespace") for r in documents}
    assert {"gpu-test1", "default"} <= namespaces
    failures = sum(r["summary"]["fail"] + r["summary"]["warn"] for r in documents)
    assert failures == sum(1 for f in corpus_result.findings if f.result == "fail")


def test_policyreport_splits_under_the_size_limit_and_keeps_every_result(engine, corpus_result):
    whole = build_reports(corpus_result, engine, now=0)
    split = build_reports(corpus_result, engine, max_bytes=20_000, max_reports=1000, now=0)
    assert len(split) > len(whole)
    for report in split:
        assert len(json.dumps(report["results"], separators=(",", ":"))) <= 20_000
    def count(reports):
        return sorted((r["metadata"].get("namespace") or "", json.dumps(e, sort_keys=True))
                      for r in reports for e in r["results"])
    assert count(split) == count(whole)
    assert len({(r["metadata"].get("namespace"), r["metadata"]["name"]) for r in split}) == len(split)


def test_policyreport_flood_is_summarised_with_whole_counts(engine, corpus_result):
    whole = build_reports(corpus_result, engine, now=0)
    summarised = build_reports(corpus_result, engine, max_bytes=10_000, max_reports=1, now=0)
    flooded = [r for r in summarised if "aiadmit.dev/omitted-results" in r["metadata"].get("annotations", {})]
    assert flooded, "the corpus's default namespace needs more than one 10 kB report"
    for report in summarised:
        assert len(json.dumps(report["results"], separators=(",", ":"))) <= 10_000
    def totals(reports):
        out = {}
        for r in reports:
            key = r["metadata"].get("namespace")
            out[key] = {k: out.get(key, {}).get(k, 0) + v for k, v in r["summary"].items()}
        return out
    assert totals(summarised) == totals(whole)
    report = flooded[0]
    omitted = int(report["metadata"]["annotations"]["aiadmit.dev/omitted-results"])
    assert omitted == sum(report["summary"].values()) - len(report["results"]) > 0
    kept = [e["result"] for e in report["results"]]
    assert "pass" not in kept or all(k in ("pass",) for k in kept[kept.index("pass"):])  # failures kept before passes


# ---------------------------------------------------------------------- text
def test_text_groups_by_file_with_remediation_and_a_table(engine, tmp_path):
    result = aiadmit("audit", GPU_OPERATOR, DRA_MULTI)
    assert result.returncode == 1
    out = result.stdout
    assert "\033[" not in out, "no colour when stdout is not a terminal"
    lines = out.splitlines()
    headings = [line for line in lines if line.endswith(".yaml")]
    assert len(headings) == len(set(headings)) == 3  # each file once: its findings are grouped under it
    heading = None
    for line in lines[:lines.index(next(line for line in lines if line.startswith("policy ")))]:
        heading = line if line in headings else heading
        if ": shm-sized [" in line or ": resources-declared [" in line:
            assert heading is not None and line.startswith(heading + ":"), (heading, line)
    first = lines.index(headings[0])
    assert lines[first + 1].startswith(headings[0] + ":") and lines[first + 2].startswith(headings[0] + ":")
    assert not [line for line in lines if line.lstrip().startswith("fix:")], "no hint under each finding"
    finding_lines = [line for line in lines if ": shm-sized [deny]" in line]
    assert all(line.split(":")[1].isdigit() and line.split(":")[2].isdigit() for line in finding_lines)
    table = lines.index(next(line for line in lines if line.startswith("policy ")))
    assert lines[table + 1].split()[0] in engine.by_id
    assert lines[-1].endswith("errors") and "resources checked" in lines[-1]
    coloured = aiadmit("audit", "--color", "always", GPU_OPERATOR)
    assert "\033[31mdeny\033[0m" in coloured.stdout


def _hints(out: str) -> dict[str, str]:
    """The `how to fix` section: policy id -> its hint, the wrapped lines joined again."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("how to fix"))
    hints: dict[str, str] = {}
    current = None
    for line in lines[start + 1:]:
        if not line.strip():
            break
        if line.startswith("  ") and not line.startswith("    "):
            current, text = line.strip().split(": ", 1)
            assert current not in hints, f"{current}: hint given twice"
            hints[current] = text
        else:
            hints[current] += " " + line.strip()
    return hints


def test_text_gives_each_failing_policys_hint_once_in_full(engine):
    """The corpus report used to carry 728 `fix:` lines of about 10 distinct hints, cut at 200 characters, and the
    hint under a capability finding was untrusted-hardening's first sentence (about the service-account token)."""
    out = aiadmit("audit", CORPUS).stdout
    failing = {line.split(": ", 2)[1].split(" [")[0] for line in out.splitlines() if re.search(r": [\w-]+ \[(deny|warn|audit)\] ", line)}
    hints = _hints(out)
    assert set(hints) == failing
    for policy_id, text in hints.items():
        assert text == " ".join(engine.by_id[policy_id].remediation.split()), policy_id  # whole, not cut
        assert "…" not in text
    # 1,010 lines since LWS's DisaggregatedSet sample is judged as a kind of the table (it was a silent pass)
    assert len(out.splitlines()) < 1100, "the corpus report should be read, not scrolled (it was 1,669 lines)"


def test_skips_are_one_line_unless_verbose_and_quiet_is_only_failing_lines():
    full = aiadmit("audit", CORPUS)
    out = full.stdout.splitlines()
    assert not [line for line in out if ", skip]" in line], "skipped checks listed one by one"
    (summary,) = [line for line in out if "check(s) skipped" in line]
    # the corpus holds no ResourceQuota, no LocalQueue for the workloads that name a Kueue queue, no PodGroup
    # for JobSet's workload-aware scheduling example, and not the ResourceClaims two DRA samples name
    assert re.search(r"^\d+ check\(s\) skipped \(unknown, not passed\): devices-declared \d+× \(cluster facts "
                     r"unknown: resourceClaims\), gang-admission \d+× \(cluster facts "
                     r"unknown: localQueues\), gang-admission 1× \(cluster facts unknown: podGroups\), gpu-quota \d+× \(cluster facts unknown: resourceQuotas\), "
                     r"gpu-quota \d+× \(cluster facts unknown: resourceQuotas, resourceClaims\); --verbose "
                     r"lists them$", summary), summary
    count = int(summary.split()[0])
    verbose = aiadmit("audit", "--verbose", CORPUS).stdout.splitlines()
    assert len([line for line in verbose if ", skip]" in line]) == count
    quiet = aiadmit("audit", "--quiet", CORPUS)
    assert quiet.returncode == full.returncode == 2  # the corpus holds one unparseable file
    quiet_lines = quiet.stdout.splitlines()
    failing = [line for line in out if re.search(r": [\w-]+ \[(deny|warn|audit)\] ", line)]
    assert sorted(quiet_lines) == sorted(failing) and quiet_lines
    # input errors are diagnostics: on stderr, `file:line:col: error: message`, with or without --quiet
    errors = [line for line in full.stderr.splitlines() if re.match(r"^\S+:\d+:\d+: error: ", line)]
    assert errors and quiet.stderr.splitlines() == errors
    assert aiadmit("audit", "--quiet", "--verbose", CORPUS).returncode == 2


# ---------------------------------------------------------------------- options
def test_fail_on_policy_and_skip(engine, tmp_path):
    assert aiadmit("audit", "--fail-on", "never", GPU_OPERATOR).returncode == 0
    only = json.loads(aiadmit("audit", "-f", "json", "--policy", "shm-sized", GPU_OPERATOR).stdout)
    assert {f["policy"] for f in only["findings"]} == {"shm-sized"}
    skipped = json.loads(aiadmit("audit", "-f", "json", "--skip", "shm-sized", GPU_OPERATOR).stdout)
    assert "shm-sized" not in {f["policy"] for f in skipped["findings"]} and skipped["findings"]
    junit = aiadmit("audit", "-f", "junit", "--policy", "shm-sized", GPU_OPERATOR).stdout
    assert {c.get("name") for _, c in _cases(junit)[1]} == {"shm-sized"}
    bad = aiadmit("audit", "--policy", "no-such-policy", GPU_OPERATOR)
    assert bad.returncode == 2 and "no-such-policy" in bad.stderr and "Traceback" not in bad.stderr


def test_config_file_applies_like_the_webhook(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\npolicies:\n"
                      "  shm-sized: {action: warn}\n  resources-declared: {enabled: false}\n")
    narrow = ("--policy", "shm-sized", "--policy", "resources-declared")
    result = aiadmit("audit", "-f", "json", "--config", str(config), *narrow, GPU_OPERATOR)
    document = json.loads(result.stdout)
    assert {(f["policy"], f["action"]) for f in document["findings"]} == {("shm-sized", "warn")}
    assert result.returncode == 0
    assert aiadmit("audit", "--config", str(config), "--fail-on", "warn", *narrow, GPU_OPERATOR).returncode == 1
    sarif = json.loads(aiadmit("audit", "-f", "sarif", "--config", str(config), GPU_OPERATOR).stdout)
    rules = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["shm-sized"]["defaultConfiguration"]["level"] == "warning"


# ---------------------------------------------------------------------- helm / kustomize pipes
HELM_RENDERED = """\
---
# Source: vllm/templates/namespace.yaml
apiVersion: v1
kind: Namespace
metadata:
  name: serving
---
# Source: vllm/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: release-vllm
  namespace: serving
spec:
  replicas: 1
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
        - name: vllm
          image: "vllm/vllm-openai:v0.6.0"
          resources:
            limits:
              nvidia.com/gpu: "1"
"""


def test_helm_template_output_on_stdin_is_attributed_to_resources(engine):
    """What `helm template release ./chart | aiadmit audit -` reads (helm is not installable here: the stream is
    written out as helm prints it, `# Source:` comments and all)."""
    result = aiadmit("audit", "-", stdin=HELM_RENDERED)
    assert result.returncode == 1, result.stderr
    finding_lines = [line for line in result.stdout.splitlines() if "[deny]" in line]
    assert finding_lines
    assert all(line.startswith("<stdin>: Deployment serving/release-vllm spec.template.spec.")
               for line in finding_lines), finding_lines
    document = json.loads(aiadmit("audit", "-f", "json", "-", stdin=HELM_RENDERED).stdout)
    assert {f["file"] for f in document["findings"]} == {"<stdin>"}
    assert all(f["resource"]["name"] == "release-vllm" for f in document["findings"])
    sarif = json.loads(aiadmit("audit", "-f", "sarif", "-", stdin=HELM_RENDERED).stdout)
    assert all("physicalLocation" not in r["locations"][0] for r in sarif["runs"][0]["results"])


def test_kubectl_kustomize_piped_into_audit(tmp_path):
    kubectl = cached_kubectl()
    if kubectl is None:
        pytest.skip(NO_KUBECTL)
    base = tmp_path / "base"
    base.mkdir()
    shutil.copy(os.path.join(GPU_OPERATOR, "tests__plugin-test.yaml"), base / "deployment.yaml")
    (base / "kustomization.yaml").write_text("resources: [deployment.yaml]\nnamespace: gpu-tests\n"
                                             "namePrefix: prod-\n")
    rendered = subprocess.run([kubectl, "kustomize", str(base)], capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    result = aiadmit("audit", "-f", "json", "-", stdin=rendered.stdout)
    document = json.loads(result.stdout)
    names = {(f["resource"]["namespace"], f["resource"]["name"]) for f in document["findings"]}
    assert names == {("gpu-tests", "prod-nvidia-plugin-test")}
    text = aiadmit("audit", "-", stdin=rendered.stdout).stdout
    assert "<stdin>: Deployment gpu-tests/prod-nvidia-plugin-test spec.template.spec" in text


def _sarif_result_as_a_dict(finding, rule_index):
    """What a SARIF result holds, as a structure: the written text must be exactly its compact JSON encoding."""
    from webhook.outputs.reports.location import locate
    from webhook.outputs.reports.sarif import LEVELS, artifact_uri

    location, resource = locate(finding), finding.resource
    where = {"logicalLocations": [{
        "name": resource.name or resource.kind,
        "fullyQualifiedName": "/".join(p for p in (location.cluster, resource.namespace, resource.kind, resource.name)
                                       if p) + (f"#{finding.pointer}" if finding.pointer else ""),
        "kind": "object"}]}
    if location.file and not location.from_stdin and location.cluster is None:
        where["physicalLocation"] = {"artifactLocation": {"uri": artifact_uri(location.file)}}
        if location.line:
            where["physicalLocation"]["region"] = {"startLine": location.line, "startColumn": max(location.column, 1)}
    skipped = finding.result == "skip"
    return {
        "ruleId": finding.policy, "ruleIndex": rule_index, "kind": "notApplicable" if skipped else "fail",
        "level": "none" if skipped else LEVELS[finding.action], "message": {"text": finding.message},
        "locations": [where],
        "partialFingerprints": {"aiadmitFinding/v1": "|".join((finding.policy, finding.rule, resource.kind,
                                                                resource.namespace, resource.name, finding.pointer))},
        "properties": {"rule": finding.rule, "action": finding.action, "result": finding.result,
                       "path": finding.pointer, "resource": resource.ref()},
    }


def test_sarif_results_are_the_exact_json_of_their_structure_for_every_kind_of_origin(engine):
    from webhook.model.findings import Finding
    from webhook.outputs.reports.sarif import _result
    from webhook.model.resource import Origin, Resource
    from webhook.inputs.sources import load_text

    text = ('apiVersion: v1\nkind: Pod\nmetadata: {name: "caf\\u00e9-\\"q\\"", namespace: ml}\n'
            'spec:\n  containers:\n    - {name: main, image: "img\\\\x"}\n')
    [from_file] = load_text(text, "dir/naïve file.yaml").resources
    [from_stdin] = load_text(text, "<stdin>").resources
    absolute = load_text(text, "/abs/path/p.yaml").resources[0]
    in_cluster = Resource(from_file.obj, Origin(cluster="prod-ctx"))
    unnamed = Resource({"apiVersion": "v1", "kind": "Pod", "metadata": {}}, Origin(file="x.yaml", document=0))
    cases = 0
    for resource in (from_file, from_stdin, absolute, in_cluster, unnamed):
        for pointer in ("/spec/containers/0/image", "/spec/nowhere", ""):
            for action, result in (("deny", "fail"), ("warn", "skip"), ("audit", "error")):
                finding = Finding("shm-sized", "sized", action, result, 'needs "/dev/shm" — sized\\n\n\t', resource,
                                  pointer)
                expected = json.dumps(_sarif_result_as_a_dict(finding, 7), separators=(",", ":"))
                assert _result(finding, 7) == expected, (resource.origin, pointer, action)
                cases += 1
    assert cases == 45


def _policyreport_result_as_a_dict(evaluation, finding, stamp):
    """What a PolicyReport result holds, as a structure (the `pass` of a policy that found nothing when
    `finding` is a policy id): the written text must be exactly its compact JSON encoding."""
    from webhook.outputs.reports.policyreport import SEVERITY, report_namespace

    resource = evaluation.resource
    ref = {"apiVersion": resource.api_version, "kind": resource.kind, "name": resource.name}
    if report_namespace(resource):
        ref["namespace"] = report_namespace(resource)
    if resource.metadata.get("uid"):
        ref["uid"] = str(resource.metadata["uid"])
    if isinstance(finding, str):
        return {"source": "aiadmit", "policy": finding, "result": "pass", "scored": True, "timestamp": dict(stamp),
                "resources": [ref]}
    entry = {"source": "aiadmit", "policy": finding.policy}
    if finding.rule:
        entry["rule"] = finding.rule
    status = ("warn" if finding.action == "warn" else "fail") if finding.result == "fail" else finding.result
    entry.update({"result": status, "scored": True, "timestamp": dict(stamp), "resources": [ref]})
    if finding.message:
        entry["message"] = finding.message
    entry["severity"] = SEVERITY[finding.action]
    line, column = finding.position() if resource.origin.located else (0, 0)
    properties = {"action": finding.action, "path": finding.pointer,
                  "file": resource.origin.file if resource.origin.cluster is None else None,
                  "line": line or None, "column": column or None}
    entry["properties"] = {k: str(v) for k, v in properties.items() if v not in (None, "")}
    return entry


def test_policyreport_results_are_the_exact_json_of_their_structure_for_every_kind_of_origin():
    from webhook.model.findings import Evaluation, Finding
    from webhook.outputs.reports.policyreport import results_for
    from webhook.model.resource import Origin, Resource
    from webhook.inputs.sources import load_text

    text = ('apiVersion: v1\nkind: Pod\nmetadata: {name: "caf\\u00e9-\\"q\\"", namespace: ml, uid: 1234}\n'
            'spec:\n  containers:\n    - {name: main, image: "img\\\\x"}\n')
    [from_file] = load_text(text, "dir/naïve file.yaml").resources
    [from_stdin] = load_text(text, "<stdin>").resources
    in_cluster = Resource(from_file.obj, Origin(cluster="prod-ctx"))
    scoped = Resource({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}},
                      Origin(cluster="prod-ctx"))
    no_namespace = Resource({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n"}}, Origin(file="x.yaml"))
    stamp = {"seconds": 1_700_000_000, "nanos": 0}
    checked = 0
    for resource in (from_file, from_stdin, in_cluster, scoped, no_namespace):
        evaluation = Evaluation(resource, policies=("shm-sized", "image-digest", "gpu-quota"))
        for pointer, (action, result), message in (("/spec/containers/0/image", ("deny", "fail"), 'a "q" — \\n\n'),
                                                   ("", ("warn", "fail"), ""), ("/x", ("audit", "skip"), "s"),
                                                   ("/spec", ("deny", "error"), "e")):
            evaluation.findings.append(Finding("shm-sized", "sized", action, result, message, resource, pointer))
        written = results_for(evaluation, stamp)
        expected = [_policyreport_result_as_a_dict(evaluation, f, stamp) for f in evaluation.findings] + [
            _policyreport_result_as_a_dict(evaluation, p, stamp) for p in ("image-digest", "gpu-quota")]
        assert [text for _, text in written] == [
            json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in expected], resource.origin
        assert [status for status, _ in written] == [e["result"] for e in expected]
        checked += len(written)
    assert checked == 30


def test_policyreport_packing_is_exact_at_the_limit():
    """A run of results is `[` + texts + commas + `]`; the packer used to let one end a byte over the limit, which
    only showed when the corpus's file paths (part of each result) made a run end exactly there."""
    from webhook.outputs.reports.policyreport import _pack

    texts = ['{"a":"' + "x" * size + '"}' for size in (10, 3, 27, 1, 8, 40, 5)]
    for limit in range(max(map(len, texts)) + 2, sum(map(len, texts)) + 10):
        runs = _pack(texts, limit)
        assert [i for run in runs for i in run] == list(range(len(texts)))
        for run in runs:
            encoded = "[" + ",".join(texts[i] for i in run) + "]"
            assert len(encoded) <= limit, (limit, list(run))
        # and runs are as long as the limit allows: the next text would not have fitted
        for run, following in zip(runs, runs[1:]):
            longer = "[" + ",".join(texts[i] for i in (*run, following.start)) + "]"
            assert len(longer) > limit


def _text_line_by_location(finding) -> str:
    """What a text report line says, built from the Location every format shares (its former construction)."""
    from webhook.outputs.reports.location import locate

    location = locate(finding)
    where = location.short()
    if location.cluster is not None or location.from_stdin or not location.line:
        where += f" {location.field}" if location.field else ""
    tag = finding.action if finding.result == "fail" else f"{finding.action}, {finding.result}"
    return f"{where}: {finding.policy} [{tag}] {finding.message}"


def test_text_lines_and_totals_agree_with_location_and_summary_for_every_kind_of_origin(engine):
    """The text report builds its lines and counts in one pass per object (text.fragment, location.Places); they
    must be what Location and jsonreport.summary say, for files, stdin, a cluster, no file and no positions."""
    from webhook.app.audit import AuditResult
    from webhook.inputs.sources import load_text
    from webhook.model.findings import Evaluation, Finding
    from webhook.model.resource import Origin, Resource
    from webhook.outputs.reports import text
    from webhook.outputs.reports.jsonreport import summary

    manifest = ('apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n'
                'spec:\n  containers:\n    - {name: main, image: "img"}\n')
    [from_file] = load_text(manifest, "dir/p.yaml").resources
    [from_stdin] = load_text(manifest, "<stdin>").resources
    [from_dash] = load_text(manifest, "-").resources
    in_cluster = Resource(from_file.obj, Origin(cluster="prod-ctx"))
    no_file = Resource(from_file.obj, Origin(node=from_file.origin.node))
    unplaced = Resource({"apiVersion": "v1", "kind": "Pod", "metadata": {}}, Origin(file="x.yaml", document=0))
    placed = Resource(from_file.obj, Origin(file="w.yaml", positions={"/spec": (4, 1)}))  # from a worker
    result = AuditResult()
    for index, resource in enumerate((from_file, from_stdin, from_dash, in_cluster, no_file, unplaced, placed)):
        evaluation = Evaluation(resource, policies=("shm-sized", "image-digest")[:index % 3])
        for pointer in ("/spec/containers/0/image", "/spec/nowhere", "/spec", "", "/spec/containers/0/image"):
            for action, outcome in (("deny", "fail"), ("warn", "skip"), ("audit", "error"), ("warn", "fail")):
                evaluation.findings.append(Finding("shm-sized" if index % 2 else "image-digest", "r", action,
                                                   outcome, f"x skipped: why {index}", resource, pointer))
        result.evaluations.append(evaluation)
    for verbose in (False, True):
        out = text.render(result, engine, verbose=verbose).splitlines()
        for evaluation in result.evaluations:
            for finding in evaluation.findings:
                if finding.result != "skip" or verbose:
                    assert _text_line_by_location(finding) in out, (finding.resource.origin, finding.pointer)
        counts = summary(result)
        by = counts["resourcesBy"]
        assert out[-1] == (
            f"{counts['resources']} resources checked ({by['denied']} denied, {by['warned']} warned, "
            f"{by['audited']} audit only, {by['passed']} passed, {by['unchecked']} no policy applied); findings: "
            f"{counts['deny']} deny, {counts['warn']} warn, {counts['audit']} audit, {counts['skipped']} skipped "
            f"({counts['ruleErrors']} could not be evaluated); {counts['errors']} input errors")
        assert "35 check(s) skipped" in "\n".join(out)
        table = [line.split() for line in out if line.startswith(("image-digest ", "shm-sized "))]
        assert table == [["image-digest", "audit,deny,warn", "40", "20", "20", "4"],
                         ["shm-sized", "audit,deny,warn", "30", "15", "15", "3"]]


def test_text_report_pieces_are_the_report_with_non_ascii_lines_apart(engine, corpus_result):
    """The command writes the text report in pieces (reports.write): together exactly `render`'s text, every
    piece ASCII but the single lines that are not, so that encoding the rest is a copy."""
    import io

    from webhook.outputs.reports import text, write
    from webhook.outputs.reports.text import _runs

    for lines in ([], ["a"], ["×"], ["a", "b", "× c", "d", "é", "ü", "e", "f"], ["× a", "b"]):
        pieces = _runs(lines)
        assert "".join(pieces) == ("\n".join(lines) + "\n" if lines else "")
        assert all(piece.isascii() or piece.count("\n") == 1 for piece in pieces), pieces
    for options in ({}, {"verbose": True}, {"quiet": True}, {"color": True}):
        stream = io.StringIO()
        write("text", stream, corpus_result, engine, **options)
        assert stream.getvalue() == text.render(corpus_result, engine, **options)
    stream = io.StringIO()
    write("json", stream, corpus_result, engine)  # a format without pieces: written whole
    assert stream.getvalue() == render("json", corpus_result, engine)
