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
    assert controller.resync_wanted == {("team-a", None)} and controller.facts is None
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
    wanted |= {("aiadmit.dev", "policies"), ("aiadmit.dev", "policyexceptions")}  # read, never their status
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
    assert controller.resync_wanted == {(None, None)}


# --------------------------------------------------------------------------- Policy and PolicyException objects

TEAM_LABEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "policies",
                          "team-label.yaml")
POLICY_ID, EXCEPTION_ID = "Policy.aiadmit.dev", "PolicyException.aiadmit.dev"


def policy_object(generation=1, expression=None, kinds=None):
    with open(TEAM_LABEL, encoding="utf-8") as handle:
        doc = yaml.safe_load(handle)
    doc["metadata"].update(uid="pol-1", generation=generation, resourceVersion=str(generation))
    if expression:
        doc["rules"][0]["expression"] = expression
    if kinds:
        doc["match"]["kinds"] = kinds
    return doc


def exception_object(namespace, generation=1, **spec):
    return {"apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyException",
            "metadata": {"name": "legacy", "namespace": namespace, "uid": f"exc-{namespace}", "generation": generation},
            "spec": {"policies": ["team-label"], "reason": "legacy jobs", "requestedBy": "lead@team-a", **spec}}


@pytest.fixture
def with_objects(controller):
    """The controller as the command makes it: fed Policy/PolicyException events, loading as the webhook does."""
    from webhook.app.clusterobjects import ClusterObjects

    objects = ClusterObjects()
    controller.objects = objects
    controller.load_engine = lambda: objects.engine(None, None, None)
    controller.served = {("apps", "Deployment"), ("apps", "ReplicaSet"), ("", "Pod"), ("batch", "Job")}
    controller._event("LIST", POLICY_ID, policy_object(), 1.0)
    controller._event("SYNC", POLICY_ID, {"uids": {"pol-1"}}, 1.0)
    controller._event("SYNC", EXCEPTION_ID, {"uids": set()}, 1.0)
    assert "team-label" in controller.engine.by_id
    assert controller.resync_wanted == set()  # the first lists come before any audited object: nothing to read again
    controller._event("ADDED", "Namespace", namespace_object("team-b"), 1.0)
    for namespace in ("team-a", "team-b"):
        controller._event("ADDED", "Deployment.apps", deployment("vllm", namespace), 2.0)
    controller.store.take_dirty()
    return controller


def team_label_fails(controller, namespace):
    (_, _, _, blob) = controller.store.objects[("Deployment.apps", namespace, "vllm")]
    return any(status == "fail" and json.loads(text)["policy"] == "team-label" for status, text in decode(blob))


def change_count(controller, kind, outcome):
    return controller.metrics.registry.get_sample_value("aiadmit_reports_cluster_object_changes_total",
                                                        {"kind": kind, "outcome": outcome}) or 0


def test_a_namespaced_exception_reads_only_its_namespace_again(with_objects):
    controller = with_objects
    assert team_label_fails(controller, "team-a") and team_label_fails(controller, "team-b")
    controller._event("ADDED", EXCEPTION_ID, exception_object("team-a"), 3.0)
    # team-label matches every AI workload: each audited kind, in team-a only
    assert controller.resync_wanted == {("team-a", kind) for kind in controller.audited}
    assert change_count(controller, "PolicyException", "loaded") == 1
    controller.resync_wanted.clear()
    controller._evaluate(("Deployment.apps", "team-a", "vllm"), deployment("vllm", "team-a"), 4.0)
    controller._evaluate(("Deployment.apps", "team-b", "vllm"), deployment("vllm", "team-b"), 4.0)
    assert not team_label_fails(controller, "team-a") and team_label_fails(controller, "team-b")
    status_write = exception_object("team-a")
    status_write["status"] = {"conditions": [{"type": "Loaded", "status": "True"}]}
    controller._event("MODIFIED", EXCEPTION_ID, status_write, 5.0)  # the webhook's status: same generation
    assert controller.resync_wanted == set()
    controller._event("MODIFIED", EXCEPTION_ID, exception_object("team-a", 2, match={"kinds": ["Pod"]}), 6.0)
    # was every kind, now Pods only: every kind of team-a, since the Deployments lose the exception
    assert controller.resync_wanted == {("team-a", kind) for kind in controller.audited}
    controller.resync_wanted.clear()
    controller._evaluate(("Deployment.apps", "team-a", "vllm"), deployment("vllm", "team-a"), 6.5)
    assert team_label_fails(controller, "team-a")
    controller._event("DELETED", EXCEPTION_ID, exception_object("team-a", 2, match={"kinds": ["Pod"]}), 7.0)
    assert controller.resync_wanted == {("team-a", "Pod")} and change_count(controller, "PolicyException", "deleted")


def test_an_exception_that_does_not_load_costs_nothing_but_itself(with_objects):
    controller = with_objects
    controller._event("ADDED", EXCEPTION_ID, exception_object("team-a", policies=["no-such-policy"]), 3.0)
    assert controller.resync_wanted == set() and change_count(controller, "PolicyException", "invalid") == 1
    assert "team-label" in controller.engine.by_id


def test_a_policy_change_reads_the_kinds_it_matches_everywhere(with_objects):
    controller = with_objects
    controller._event("MODIFIED", POLICY_ID, policy_object(2, kinds=["Deployment"]), 3.0)
    # generation 1 matched every AI workload, generation 2 only Deployments: every kind either admits
    assert controller.resync_wanted == {(None, kind) for kind in controller.audited}
    controller.resync_wanted.clear()
    controller._event("MODIFIED", POLICY_ID, policy_object(3, expression="true", kinds=["Deployment"]), 4.0)
    assert controller.resync_wanted == {(None, "Deployment.apps")}
    controller.resync_wanted.clear()
    controller._evaluate(("Deployment.apps", "team-a", "vllm"), deployment("vllm", "team-a"), 5.0)
    assert not team_label_fails(controller, "team-a")
    # a generation that does not load: the previous one keeps being enforced, so nothing is judged differently
    controller._event("MODIFIED", POLICY_ID, policy_object(4, expression="object.nope(", kinds=["Deployment"]), 6.0)
    assert controller.resync_wanted == set() and change_count(controller, "Policy", "invalid") == 1
    assert controller.engine.by_id["team-label"].rules[0].expression.source == "true"
    controller._event("DELETED", POLICY_ID, policy_object(4, kinds=["Deployment"]), 7.0)
    assert controller.resync_wanted == {(None, "Deployment.apps")} and "team-label" not in controller.engine.by_id


def test_a_relist_of_the_objects_forgets_the_deleted_ones(with_objects):
    controller = with_objects
    controller._event("SYNC", POLICY_ID, {"uids": set()}, 3.0)  # after a 410: listed again, the Policy gone
    assert "team-label" not in controller.engine.by_id
    assert controller.resync_wanted == {(None, kind) for kind in controller.audited}


def test_reads_again_cover_each_pair_once():
    from webhook.app.reportscope import plan

    kinds = {"Pod", "Deployment.apps", "Job.batch"}
    assert plan({("team-a", None), (None, "Pod"), ("team-b", "Job.batch"), ("team-c", "Pod")}, kinds) == [
        (None, ["Pod"]), ("team-a", ["Deployment.apps", "Job.batch"]), ("team-b", ["Job.batch"])]
    assert plan({(None, None), ("team-a", "Pod")}, kinds) == [(None, sorted(kinds))]
    assert plan({("team-a", "StatefulSet.apps")}, kinds) == []  # not served: nothing to read
