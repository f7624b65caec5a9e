"""Evaluating in forked workers gives exactly what one process gives, lines included."""

import os
import shutil

import pytest

from webhook.app.audit import PARALLEL_THRESHOLD, audit_paths
from webhook.engine.core import Engine

from testdata import CORPUS  # tests/data/corpus, in the repository


def flat(result):
    return [(f.policy, f.rule, f.action, f.result, f.message, f.pointer, f.resource.name, f.position())
            for f in result.findings]


def test_parallel_equals_sequential(tmp_path):
    # Enough copies of the corpus to cross the threshold, so the workers really run.
    for copy in range(-(-PARALLEL_THRESHOLD // 150) + 1):
        shutil.copytree(CORPUS, tmp_path / f"copy{copy}", ignore=shutil.ignore_patterns("_unparseable"))
    engine = Engine.load()
    sequential = audit_paths(engine, [str(tmp_path)], jobs=1)
    parallel = audit_paths(engine, [str(tmp_path)], jobs=2)
    assert len(sequential.evaluations) >= PARALLEL_THRESHOLD
    assert flat(parallel) == flat(sequential)
    assert [e.policies for e in parallel.evaluations] == [e.policies for e in sequential.evaluations]
    assert parallel.errors == sequential.errors and parallel.exit_code() == sequential.exit_code()


def test_the_parent_loads_only_the_documents_that_can_be_facts():
    from webhook.app.parallel import _fact_documents

    text = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {template: {spec: {containers: [{name: a, image: x}]}}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
--- {apiVersion: v1, kind: Service, metadata: {name: c}}  # not a fact (ConfigMaps are: envFrom)
--- # a List of quotas
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ResourceQuota, metadata: {name: q, namespace: team-a}, spec: {hard: {requests.nvidia.com/gpu: "8"}}}
---
kind: PriorityClass
apiVersion: scheduling.k8s.io/v1
metadata: {name: ai-training}
value: 1000
"""
    found = [(r.kind, r.name) for r in _fact_documents(text, "multi.yaml")]
    assert found == [("Namespace", "team-a"), ("ResourceQuota", "q"), ("PriorityClass", "ai-training")]
