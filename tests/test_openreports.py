"""`aiadmit audit --format openreports`: openreports.io/v1alpha1 Report / ClusterReport objects, checked against the
published OpenReports CRD schema (tests/data/openreports-crds.yaml, source and licence in tests/data/README.md), and
against the PolicyReport writer whose results they share. The inputs are written here: no ../shared needed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from jsonschema import Draft7Validator

from webhook.app.audit import audit_paths
from webhook.engine.core import Engine
from webhook.outputs.reports import render
from webhook.outputs.reports import openreports, policyreport

CRDS = __file__.rsplit("/", 1)[0] + "/data/openreports-crds.yaml"
NOW = 1_764_547_200.0

MANIFESTS = """\
apiVersion: batch/v1
kind: Job
metadata: {name: finetune, namespace: research}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: trainer:latest
          resources: {limits: {nvidia.com/gpu: "1"}}
---
apiVersion: v1
kind: Pod
metadata: {name: no-namespace}
spec:
  containers:
    - name: c
      image: busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000
      resources: {limits: {nvidia.com/gpu: "1"}}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: torch-distributed}
spec:
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: pytorch/pytorch:latest
                      resources: {limits: {nvidia.com/gpu: "8"}}
"""


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


@pytest.fixture(scope="module")
def manifests(tmp_path_factory):
    path = tmp_path_factory.mktemp("openreports") / "workloads.yaml"
    path.write_text(MANIFESTS)
    return path


@pytest.fixture(scope="module")
def result(engine, manifests):
    return audit_paths(engine, [str(manifests)])


@pytest.fixture(scope="module")
def schemas() -> dict[str, dict]:
    with open(CRDS, encoding="utf-8") as handle:
        crds = [d for d in yaml.safe_load_all(handle) if d]
    return {crd["spec"]["names"]["kind"]: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] for crd in crds}


def _keys_not_in_schema(value, schema, path="") -> list[str]:
    """Fields the API server would prune silently (structural schemas drop unknown fields)."""
    out = []
    if isinstance(value, dict) and "properties" in schema:
        for key, item in value.items():
            if key not in schema["properties"]:
                out.append(f"{path}/{key}")
            else:
                out += _keys_not_in_schema(item, schema["properties"][key], f"{path}/{key}")
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            out += _keys_not_in_schema(item, schema["items"], f"{path}/{index}")
    return out


def test_reports_validate_against_the_openreports_crds_and_lose_no_field(engine, result, schemas):
    documents = [d for d in yaml.safe_load_all(render("openreports", result, engine, now=NOW)) if d]
    assert {d["kind"] for d in documents} == {"Report", "ClusterReport"}
    for document in documents:
        assert document["apiVersion"] == "openreports.io/v1alpha1" and document["source"] == "aiadmit"
        schema = schemas[document["kind"]]
        errors = list(Draft7Validator(schema).iter_errors(document))
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
        assert not _keys_not_in_schema(document, schema), _keys_not_in_schema(document, schema)
        assert ("namespace" in document["metadata"]) == (document["kind"] == "Report")
        counts = {status: 0 for status in ("pass", "fail", "warn", "error", "skip")}
        for entry in document["results"]:
            counts[entry["result"]] += 1
        assert document["summary"] == counts
    by_name = {(d["kind"], d["metadata"].get("namespace")): d for d in documents}
    assert set(by_name) == {("ClusterReport", None), ("Report", "research"), ("Report", "default")}
    cluster = by_name[("ClusterReport", None)]
    assert {r["resources"][0]["kind"] for r in cluster["results"]} == {"ClusterTrainingRuntime"}
    failed = {r["policy"] for r in by_name[("Report", "research")]["results"] if r["result"] == "fail"}
    assert {"resources-declared", "shm-sized"} <= failed


def test_same_results_and_packing_as_the_policyreport_writer(engine, result):
    """OpenReports changes the envelope only: the results, names, splits and summaries are the PolicyReport's."""
    for max_bytes in (policyreport.DEFAULT_MAX_BYTES, 10_000):
        ours = openreports.build_reports(result, engine, max_bytes=max_bytes, now=NOW)
        theirs = policyreport.build_reports(result, engine, max_bytes=max_bytes, now=NOW)
        assert len(ours) == len(theirs)
        for mine, other in zip(ours, theirs):
            assert mine["kind"] == openreports.KINDS[other["kind"]]
            assert {k: v for k, v in mine.items() if k not in ("apiVersion", "kind", "source")} == \
                   {k: v for k, v in other.items() if k not in ("apiVersion", "kind")}
    rendered = [d for d in yaml.safe_load_all(render("openreports", result, engine, now=NOW)) if d]
    assert rendered == openreports.build_reports(result, engine, now=NOW)


def test_cli_writes_openreports_and_refuses_apply_without_a_cluster(manifests):
    done = subprocess.run([sys.executable, "-m", "webhook", "audit", "-f", "openreports", str(manifests)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr  # the Job has deny-level findings
    documents = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert documents and all(d["apiVersion"] == "openreports.io/v1alpha1" for d in documents)
    json.dumps(documents)  # plain data
    refused = subprocess.run([sys.executable, "-m", "webhook", "audit", "-f", "openreports", "--apply-reports",
                              str(manifests)], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert "--apply-reports needs --cluster and --format policyreport or openreports" in refused.stderr
