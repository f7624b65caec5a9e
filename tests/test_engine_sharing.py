"""Places alike replay the outcomes of the first (engine/sharing.py): the findings are those of running every rule.

What would go wrong if the sharing were loose: a Worker container that differs from the Master's only where
Python's `==` cannot see it (1 == 1.0 == true, -0.0 == 0.0, the same keys in another order) would get the Master's
outcomes. Each test compares a resource whose places may be alike with the same resource where they cannot be (the
Master's container written with its keys in another order, equal by `==` but never the same data), so the rules
run at every place: the findings must not differ.
"""

import copy
import textwrap

from webhook.engine import sharing
from webhook.engine.core import Engine
from webhook.inputs.sources import load_text
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource

POLICY = textwrap.dedent("""
    apiVersion: aiadmit.dev/v1alpha1
    kind: Policy
    metadata: {name: alike}
    summary: test policy
    why: test
    remediation: test
    action: deny
    match: {anyClasses: [ai]}
    target: container
    variables:
      - name: stdin
        expression: "has(container.stdin) ? container.stdin : false"
    rules:
      - name: no-stdin
        expression: variables.stdin != true
        message: container {{containerName}} ({{template}}) keeps stdin open ({{variables.stdin}})
        path: /stdin
      - name: tty-typed
        when: has(container.tty)
        expression: type(container.tty) == bool
        message: container {{containerName}} ({{template}}) tty is a {{type(container.tty)}}
        path: /tty
      - name: signed-zero
        when: has(container.workingDir) && has(container.ports)
        expression: string(1.0 / double(container.ports[0].containerPort)) != "-inf"
        message: "{{template}}: {{string(1.0 / double(container.ports[0].containerPort))}}"
        path: /ports
      - name: first-port-named
        when: has(container.ports)
        expression: container.ports.map(p, p).exists(p, true) && int(container.ports[0].containerPort) > 0
        message: "{{template}}: first port"
        path: /ports
      - name: quota-known
        requires: [resourceQuotas]
        when: has(container.resources) && has(container.resources.limits)
        expression: size(cluster.resourceQuotas) > 0
        message: container {{containerName}} has no quota
        path: /resources/limits
      - name: broken
        when: has(container.env)
        expression: container.env[5].name == "x"
        message: never shown
        path: /env
      - name: schema-checked
        when: has(container.workingDir)
        schema: {properties: {workingDir: {pattern: "^/app"}}}
        message: container {{containerName}} ({{template}}) workingDir is not under /app
        path: /workingDir
      - name: pod-priority
        target: pod
        expression: has(pod.priorityClassName)
        message: "{{template}} sets no priorityClassName"
        path: /priorityClassName
""")

CONTAINER = {"name": "train", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu": "8"}},
             "env": [{"name": "A", "value": "1"}], "stdin": True, "tty": True, "workingDir": "/w",
             "ports": [{"containerPort": 80}]}


def _engine(tmp_path):
    path = tmp_path / "alike.yaml"
    path.write_text(POLICY)
    return Engine.load([str(path)])


def _job(master: dict, worker: dict) -> Resource:
    return Resource({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                     "metadata": {"name": "ddp", "namespace": "ml"},
                     "spec": {"pytorchReplicaSpecs": {
                         "Master": {"template": {"spec": {"containers": [master]}}},
                         "Worker": {"template": {"spec": {"containers": [worker]}}}}}})


def _other(container: dict) -> dict:
    """A Master container no Worker container is alike: its own name."""
    return dict(copy.deepcopy(container), name="other")


def _findings(engine, resource, facts=None, only="/"):
    return [(f.policy, f.rule, f.result, f.message, f.pointer, f.action)
            for f in engine.evaluate(resource, facts).findings if only in f.pointer]


def _worker_like(**changes) -> dict:
    worker = copy.deepcopy(CONTAINER)
    for key, value in changes.items():
        worker[key] = value
    return worker


def test_alike_places_find_what_running_every_rule_finds(tmp_path):
    engine = _engine(tmp_path)
    shared = _findings(engine, _job(CONTAINER, copy.deepcopy(CONTAINER)))
    worker = [finding for finding in shared if "/Worker/" in finding[4]]
    assert worker == _findings(engine, _job(_other(CONTAINER), copy.deepcopy(CONTAINER)), only="/Worker/")
    rules = [(rule, result) for _, rule, result, _, pointer, _ in shared if "/Worker/" in pointer]
    # the failed check, the error, the skipped rule that requires facts: each made again at the Worker's place
    assert rules == [("pod-priority", "fail"), ("no-stdin", "fail"), ("quota-known", "skip"), ("broken", "error"),
                     ("schema-checked", "fail")]
    messages = [m for _, rule, _, m, pointer, _ in shared if rule in ("no-stdin", "pod-priority")]
    assert messages == ["Master sets no priorityClassName", "container train (Master) keeps stdin open (true)",
                        "Worker sets no priorityClassName", "container train (Worker) keeps stdin open (true)"]
    schema = [(m, p) for _, rule, _, m, p, _ in shared if rule == "schema-checked"]
    assert [m for m, _ in schema] == [f"container train ({role}) workingDir is not under /app"
                                      for role in ("Master", "Worker")]
    assert [p for _, p in schema] == [f"/spec/pytorchReplicaSpecs/{role}/template/spec/containers/0/workingDir"
                                      for role in ("Master", "Worker")]


def test_values_equal_in_python_but_not_in_cel_are_not_shared(tmp_path):
    engine = _engine(tmp_path)
    zero = _worker_like(ports=[{"containerPort": 0.0}])
    pairs = [(CONTAINER, _worker_like(stdin=1)), (CONTAINER, _worker_like(tty=1)), (CONTAINER, _worker_like(stdin=1.0)),
             (zero, _worker_like(ports=[{"containerPort": -0.0}])), (zero, _worker_like(ports=[{"containerPort": 0}]))]
    for master, worker in pairs:
        assert master == worker  # what Python's `==` cannot tell apart
        alike = _findings(engine, _job(master, worker), only="/Worker/")
        assert alike == _findings(engine, _job(_other(master), worker), only="/Worker/"), worker
    # and the rules do tell them apart (so the comparison above can fail)
    stdin = [m for _, rule, _, m, _, _ in _findings(engine, _job(CONTAINER, _worker_like(stdin=1))) if rule == "no-stdin"]
    assert stdin == ["container train (Master) keeps stdin open (true)"]
    zeros = [m for _, rule, _, m, _, _ in _findings(engine, _job(zero, _worker_like(ports=[{"containerPort": -0.0}])))
             if rule == "signed-zero"]
    assert zeros == ["Worker: -inf"]


def test_known_facts_run_the_rule_at_each_alike_place(tmp_path):
    engine = _engine(tmp_path)
    facts = OfflineFacts(load_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n", "ns.yaml").resources)
    found = _findings(engine, _job(CONTAINER, copy.deepcopy(CONTAINER)), facts)
    assert [f for f in found if "/Worker/" in f[4]] == _findings(engine, _job(_other(CONTAINER), copy.deepcopy(CONTAINER)),
                                                                  facts, only="/Worker/")
    assert [p for _, rule, result, _, p, _ in found if rule == "quota-known"] == [
        "/spec/pytorchReplicaSpecs/Master/template/spec/containers/0/resources/limits",
        "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources/limits"]


def test_same_is_exact():
    assert sharing.alike(({"a": [1, "x", None, True, 1.5]},), ({"a": [1, "x", None, True, 1.5]},), {})
    for first, second in ((1, 1.0), (1, True), (0.0, -0.0), ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
                          ([1], [1.0]), ({"a": {"b": 0}}, {"a": {"b": False}}), (float("nan"), float("nan"))):
        assert not sharing.alike(({"k": first},), ({"k": second},), {}), (first, second)

    class Tagged(str):
        pass

    assert not sharing.alike((Tagged("x"),), ("x",), {})
    # deeper than Python's recursion follows: not known to be the same
    assert not sharing.alike((_deep(5000),), (_deep(5000),), {})


def _deep(levels: int) -> dict:
    deep = current = {}
    for _ in range(levels):
        current["a"] = {}
        current = current["a"]
    return deep


def test_maps_found_the_same_make_their_maps_one_level_down_known():
    pod = {"containers": [{"name": "a", "stdin": True}], "securityContext": {"runAsNonRoot": True}, "x": [1]}
    other = copy.deepcopy(pod)
    known: dict = {}
    assert sharing.alike((pod,), (other,), known)
    assert known[id(pod["containers"][0]), id(other["containers"][0])][0]
    assert known[id(pod["securityContext"]), id(other["securityContext"])][0]
    # equal by `==` but not the same data below the top: not alike, and nothing below it is taken as known
    differs = copy.deepcopy(pod)
    differs["containers"][0]["stdin"] = 1
    known = {}
    assert not sharing.alike((pod,), (differs,), known)
    assert (id(pod["containers"][0]), id(differs["containers"][0])) not in known
