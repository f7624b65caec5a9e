"""Auditing files in worker processes gives what one process gives: findings, lines, errors, skips, order."""

import os
import shutil
from functools import partial

import pytest

from webhook.app.audit import audit_paths
from webhook.engine.core import Engine
from webhook.app.parallel import MIN_BYTES_PER_JOB, audit_files
from webhook.outputs.reports import FORMATS, fragment, render
from webhook.inputs.sources import iter_manifest_files

from testdata import CORPUS  # tests/data/corpus, in the repository


def flat(result):
    return ([(f.policy, f.rule, f.action, f.result, f.message, f.pointer, f.resource.kind, f.resource.namespace,
              f.resource.name, f.resource.origin.file, f.position()) for f in result.findings],
            [e.as_dict() for e in result.errors], [s.as_dict() for s in result.skipped],
            [(e.resource.kind, e.resource.name, e.policies, e.classes) for e in result.evaluations], result.notes)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    for copy in range(3):  # the whole corpus, the unparseable file included, three times: enough to fork
        shutil.copytree(CORPUS, root / f"copy{copy}")
    (root / "copy0" / "templated.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n{{ include \"labels\" . | indent 2 }}\n")
    (root / "copy1" / "latin1.yaml").write_bytes(b"apiVersion: v1\nkind: Pod\nmetadata: {name: caf\xe9}\n")
    return root


def test_workers_equal_one_process(tree):
    engine = Engine.load()
    files = list(iter_manifest_files([str(tree)]))
    assert sum(os.path.getsize(f) for f in files) >= MIN_BYTES_PER_JOB * 2
    assert audit_files(engine, files, 2) is not None  # really forked
    parallel = audit_paths(engine, [str(tree)], jobs=2)
    sequential = audit_paths(engine, [str(tree)], jobs=1)
    assert flat(parallel) == flat(sequential)
    assert parallel.errors and parallel.skipped and any(f.position()[0] for f in parallel.findings)
    assert any(e.file.endswith("latin1.yaml") and "cannot read file" in e.message for e in parallel.errors)
    # the input's Namespace and ResourceQuota documents reached the workers as facts: quota rules ran, not skipped
    assert any(f.policy == "gpu-quota" and f.result == "fail" for f in parallel.findings)


def test_an_hpa_keeps_the_audit_in_one_process(tree, tmp_path):
    shutil.copytree(tree, tmp_path / "tree")
    (tmp_path / "tree" / "hpa.yaml").write_text(
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h, namespace: ml}\n"
        "spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: d}, maxReplicas: 3}\n")
    files = list(iter_manifest_files([str(tmp_path / "tree")]))
    assert audit_files(Engine.load(), files, 2) is None


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_reports_rendered_by_the_workers_equal_one_process(tree, name):
    # The command lets each worker render its objects' part of the report (webhook.outputs.reports.fragment); the report
    # must be the very one a single process writes, byte for byte, narrowed by --policy/--skip the same way.
    engine = Engine.load()
    options = {"now": 1_700_000_000.0, "fail_on": "deny", "color": name == "text"}
    for narrow in ({}, {"skip": {"image-digest"}}, {"policies": {"shm-sized", "gpu-quota"}}):
        prepare = partial(fragment, name, engine=engine, **options)
        parallel = audit_paths(engine, [str(tree)], jobs=2, prepare=prepare, **narrow)
        assert parallel.prepared is not None and len(parallel.prepared) == len(parallel.evaluations)
        sequential = audit_paths(engine, [str(tree)], jobs=1, **narrow)
        assert sequential.prepared is None
        made_by_workers = render(name, parallel, engine, fragments=parallel.prepared, **options)
        assert made_by_workers == render(name, sequential, engine, **options), narrow
        if narrow.get("skip"):  # SARIF still lists every policy of the bundle as a rule, but no result of it
            assert ('"ruleId":"image-digest"' if name == "sarif" else "image-digest") not in made_by_workers


@pytest.mark.parametrize("load, expected", [(0.0, 2), (0.4, 2), (0.6, 1), (1.0, 1), (3.5, 1), (12.0, 1)])
def test_default_jobs_leaves_busy_cores_alone(monkeypatch, load, expected):
    """-j's default on two cores: a second process only when the load average leaves a core idle."""
    from webhook.app import parallel

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert parallel.default_jobs() == expected


def test_default_jobs_without_a_load_average(monkeypatch):
    from webhook.app import parallel

    def unavailable():
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert parallel.default_jobs() == len(os.sched_getaffinity(0))
