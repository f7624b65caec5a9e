"""The reports controller's evaluation and bookkeeping, fed watch events directly (no API server; the e2e test
tests/e2e/test_reports_controller_e2e.py runs it against a real one).

What it must keep: per object only its results; a change that does not change the results marks nothing; an
owned object is its owner's; a namespace's reports are exactly what `audit --cluster -f policyreport` writes for
the same objects.
"""

import copy
import json
import os
import pytest
import yaml

from webhook.app.audit import audit_resources
from webhook.app.clusteraudit import ListedFacts
from webhook.app.kubewatch import KindWatcher
from webhook.app.reportmetrics import ReportMetrics
from webhook.app.reportscontroller import Controller, kind_id
from webhook.app.reportstore import decode, encode
from webhook.app.clusteraudit import ApiResource
from webhook.engine.core import Engine
from webhook.model.resource import Origin, Resource
from webhook.outputs.reports import policyreport

GPU = {"name": "main", "image": "registry.example/serve:v1", "resources": {"limits": {"nvidia.com/gpu": 1}}}


@pytest.fixture(scope="module")
def engine():
    return Engine.load(None, None)


def deployment(name, namespace="team-a", container=GPU, replicas=1):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}}}


def namespace_object(name, labels=None):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": f"ns-{name}",
                                                                  "labels": labels or {}}}


@pytest.fixture
def controller(engine):
    made = Controller(None, engine, lambda: engine, ReportMetrics(), context="test")
    made.audited = {"Deployment.apps", "ReplicaSet.apps", "Pod", "Job.batch", "Job.batch.volcano.sh"}
    made.owner_kinds = {"Deployment", "ReplicaSet", "Pod", "Job"}
    for group, kind, plural in (("", "Namespace", "namespaces"), ("apps", "Deployment", "deployments")):
        watcher = KindWatcher(None, ApiResource(group, "v1", kind, plural, kind != "Namespace"), lambda *a: None)
        watcher.listed.set()
        made.watchers[kind_id(group, kind)] = watcher
    made._event("LIST", "Namespace", namespace_object("team-a"), 1.0)
    made._event("LIST", "PriorityClass.scheduling.k8s.io", {"apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass", "metadata": {"name": "system-cluster-critical"}, "value": 2000000000}, 1.0)
    assert made.resync_wanted == set()  # listed facts are no change
    return made


def test_results_only_and_no_change_marks_nothing(controller):
    controller._event("ADDED", "Deployment.apps", deployment("vllm"), 2.0)
    ((key, (uid, namespace, _, blob)),) = controller.store.objects.items()
    assert key == ("Deployment.apps", "team-a", "vllm") and uid == "uid-team-a-vllm" and namespace == "team-a"
    assert isinstance(blob, bytes) and any(status == "fail" for status, _ in decode(blob))
    assert set(controller.store.take_dirty()) == {"team-a"}
    updated = deployment("vllm")
    updated["status"] = {"observedGeneration": 2, "replicas": 1}  # a status write: same results
    controller._event("MODIFIED", "Deployment.apps", updated, 3.0)
    assert controller.store.take_dirty() == {}
    controller._event("DELETED", "Deployment.apps", updated, 5.0)
    dirty = controller.store.take_dirty()
    assert dirty == {"team-a": (5.0, [])} and controller.store.objects == {}


def test_owned_objects_are_their_owners(controller):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "vllm-abc12", "namespace": "team-a", "uid": "p1",
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "vllm-abc",
                                             "uid": "rs1", "controller": True}]},
           "spec": {"containers": [GPU]}}
    controller._event("ADDED", "Pod", pod, 2.0)
    assert controller.store.objects == {}
    standalone = copy.deepcopy(pod)
    del standalone["metadata"]["ownerReferences"]
    controller._event("ADDED", "Pod", standalone, 3.0)
    assert list(controller.store.objects) == [("Pod", "team-a", "vllm-abc12")]
    controller._event("MODIFIED", "Pod", pod, 4.0)  # adopted: now its owner's
    assert controller.store.objects == {}


def test_reports_are_the_audit_reports(controller, engine):
    objects = [deployment("vllm"), deployment("web", container={"name": "main", "image": "nginx"}),
               deployment("other", namespace="team-b")]
    controller._event("ADDED", "Namespace", namespace_object("team-b"), 1.0)
    for obj in objects:
        controller._event("ADDED", "Deployment.apps", copy.deepcopy(obj), 2.0)
    written = {}
    for namespace, (_, results) in controller.store.take_dirty().items():
        for report, texts in controller.writer.reports(namespace, results):
            written[report["metadata"]["name"]] = dict(report, results=[json.loads(t) for t in texts])
    resources = [Resource(obj, Origin(cluster="test")) for obj in objects]
    facts = ListedFacts([Resource(namespace_object(n), Origin(cluster="test")) for n in ("team-a", "team-b")]
                        + resources)
    expected = {r["metadata"]["name"]: r
                for r in policyreport.build_reports(audit_resources(engine, resources, facts=facts), engine)}

    def canonical(report):
        results = sorted((dict(r, timestamp=None) for r in report["results"]), key=json.dumps)
        return dict(report, results=results)

    assert set(written) == {"aiadmit-team-a", "aiadmit-team-b"} == set(expected)
    for name in written:
        assert canonical(written[name]) == canonical(expected[name])


def test_a_namespace_label_change_reads_that_namespace_again(controller):
    controller._event("ADDED", "Deployment.apps", deployment("vllm"), 2.0)
    controller._event("MODIFIED", "Namespace", namespace_object("team-a", {"tier": "trusted"}), 3.0)
    assert controller.resync_wanted == {"team-a"} and controller.facts is None
    controller.resync_wanted.clear()
    again = namespace_object("team-a", {"tier": "trusted"})
    again["metadata"]["resourceVersion"] = "99"
    controller._event("MODIFIED", "Namespace", again, 4.0)  # nothing facts read changed
    assert controller.resync_wanted == set()


def test_store_encoding_round_trips():
    results = [("fail", '{"policy":"a","message":"tab\\there"}'), ("pass", '{"policy":"b"}')]
    assert decode(encode(results)) == results and decode(b"") == []


# --------------------------------------------------------------------------- the shipped component

COMPONENT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "manifests", "components",
                         "reports-controller")


def _component(name):
    with open(os.path.join(COMPONENT, name), encoding="utf-8") as handle:
        return [d for d in yaml.safe_load_all(handle) if d]


def test_component_rbac_is_the_kinds_table_read_only_and_reports_written():
    from webhook.app.clusteraudit import FACT_KINDS
    from webhook.k8s.workload import kind_table

    objects = {o["kind"]: o for o in _component("rbac.yaml")}
    granted = {}
    for rule in objects["ClusterRole"]["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    read = {key for key, verbs in granted.items() if verbs == {"list", "watch"}}
    wanted = {(group, kind.lower() + ("es" if kind.endswith("s") else "s"))
              for group, kind in set(kind_table()) | set(FACT_KINDS)}  # every plural here is the regular one
    assert read == wanted
    written = {key: verbs for key, verbs in granted.items() if key not in read}
    assert written == {(g, r): {"get", "list", "create", "update", "delete"}
                       for g, rs in (("wgpolicyk8s.io", ("policyreports", "clusterpolicyreports")),
                                     ("openreports.io", ("reports", "clusterreports"))) for r in rs}
    assert not any(rule["resources"] == ["secrets"] for rule in objects["ClusterRole"]["rules"])
    lease_rules = objects["Role"]["rules"]
    assert {r["resources"][0] for r in lease_rules} == {"leases"} and objects["Role"]["metadata"]["namespace"]
    assert [r.get("resourceNames") for r in lease_rules if "update" in r["verbs"]] == [["aiadmit-reports-controller"]]


def test_component_deployment_runs_the_command_the_cli_parses():
    from webhook.app.cli import build_parser

    (deployment,) = _component("deployment.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["aiadmit", "reports-controller"]
    args = build_parser(container["command"][1:]).parse_args(container["command"][1:] + container["args"])
    assert args.leader_elect and args.metrics_port == 9090 and args.policies == ["/etc/aiadmit/policies"]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "aiadmit-reports-controller"


CHART = os.path.join(os.path.dirname(COMPONENT), "..", "..", "charts", "aiadmit")


def test_chart_copy_of_the_component_rbac_is_current():
    with open(os.path.join(CHART, "files", "reports-controller", "rbac.yaml"), encoding="utf-8") as copy:
        with open(os.path.join(COMPONENT, "rbac.yaml"), encoding="utf-8") as original:
            assert copy.read() == original.read(), "cp manifests/components/reports-controller/rbac.yaml " \
                                                   "charts/aiadmit/files/reports-controller/rbac.yaml"


def _helm():
    import glob

    found = os.environ.get("AIADMIT_HELM") or next(iter(sorted(glob.glob(os.path.expanduser(
        "~/.cache/aiadmit-e2e/helm-*/bin/helm")))), None)
    if not found:
        pytest.skip("no helm: set AIADMIT_HELM or build it with tests/e2e/cluster/build-helm.sh")
    return found


def test_chart_toggle_renders_the_component(tmp_path):
    import subprocess

    helm = _helm()

    def template(*settings):
        done = subprocess.run([helm, "template", "aiadmit", CHART, "--namespace", "aiadmit-system", *settings],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return [d for d in yaml.safe_load_all(done.stdout) if d]

    assert not [d for d in template() if d["metadata"]["name"] == "aiadmit-reports-controller"]
    rendered = {d["kind"]: d for d in template("--set", "reportsController.enabled=true", "--set",
                                               "reportsController.format=openreports")
                if d["metadata"]["name"] == "aiadmit-reports-controller"}
    component = {d["kind"]: d for d in _component("rbac.yaml")}
    assert set(rendered) == set(component) | {"Deployment"}
    for kind in ("ClusterRole", "Role"):
        assert rendered[kind]["rules"] == component[kind]["rules"]
    (container,) = rendered["Deployment"]["spec"]["template"]["spec"]["containers"]
    from webhook.app.cli import build_parser

    args = build_parser(container["command"][1:]).parse_args(container["command"][1:] + container["args"])
    assert args.format == "openreports" and args.leader_elect
    refused = subprocess.run([helm, "template", "aiadmit", CHART, "--set", "reportsController.format=yaml"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "reportsController" in refused.stderr


def test_a_new_priority_class_reads_everything_again(controller):
    controller._event("ADDED", "PriorityClass.scheduling.k8s.io", {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "gpu-high"}, "value": 9}, 2.0)
    assert controller.resync_wanted == {None}
