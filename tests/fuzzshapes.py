"""Hypothesis strategies for hostile inputs: AdmissionReviews and manifests of every shape the engine reads.

Shared by tests/test_fuzz.py (a few hundred seeded cases in every test run) and bench/fuzz.py (thousands).
Each object starts as a plausible workload of a kind aiadmit knows (so that the policies really run on it),
then has fields replaced, at paths the engine reads, by values of every JSON type, quantities beyond range,
NaN and infinities, huge integers, deep nesting and odd strings. The properties themselves live with the callers.
"""

from __future__ import annotations

import copy
import json
import uuid

from hypothesis import strategies as st

IMAGE = "registry.example/x@sha256:" + "a" * 64

# ------------------------------------------------------------------------------------------------ values
ODD_STRINGS = ["", " ", "1e400", "1e99999999999", "9" * 80, ".nan", "-1", "0.0001m", "8Ei", "7Ei", "1Gi", "500m",
               "all", "void", "none", "untrusted", "trusted", "notebook", "training", "{{ x }}", "\u0000", "é" * 5,
               "a/b", "~1", "*", "kube-system", "nvidia.com/gpu", "NVIDIA_VISIBLE_DEVICES"]
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.sampled_from([10 ** 30, -(10 ** 30), 2 ** 63, 2 ** 63 - 1, 0, 1, -1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(ODD_STRINGS),
    st.text(max_size=12),
)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.one_of(st.sampled_from(ODD_STRINGS), st.text(max_size=8)), inner, max_size=4)),
    max_leaves=12)


def deep(depth: int) -> object:
    value: object = {}
    for _ in range(depth):
        value = {"a": [value]}
    return value


HOSTILE = st.one_of(JSON, st.sampled_from([deep(60), deep(200), [[[[[]]]]], {"": {"": {"": None}}}]))

# ------------------------------------------------------------------------------------------------ objects
def _container(name: str = "c") -> dict:
    return {"name": name, "image": IMAGE,
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "X", "valueFrom": {}}],
            "envFrom": [{"configMapRef": {"name": "cm"}}, {"prefix": "NVIDIA_", "secretRef": {"name": "s"}}],
            "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}},
            "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
            "ports": [{"containerPort": 8080}],
            "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "8Gi", "cpu": "2"},
                          "requests": {"nvidia.com/gpu": 1, "memory": "8Gi", "cpu": "2",
                                       "ephemeral-storage": "10Gi"}}}


def _pod_spec() -> dict:
    return {"containers": [_container(), _container("d")], "initContainers": [_container("init")],
            "ephemeralContainers": [{"name": "debug", "image": IMAGE, "securityContext": {"privileged": True}}],
            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
                        {"name": "root", "hostPath": {"path": "/"}}],
            "hostNetwork": True, "nodeSelector": {"nvidia.com/gpu.present": "true"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["A100"]}]}]}}},
            "securityContext": {"runAsNonRoot": True}, "priorityClassName": "high", "runtimeClassName": "gvisor",
            "resourceClaims": [{"name": "gpu"}], "tolerations": [{"key": "nvidia.com/gpu"}]}


def _meta(name: str) -> dict:
    return {"name": name, "namespace": "team",
            "labels": {"aiadmit.dev/tier": "trusted", "aiadmit.dev/role": "training", "notebook-name": "nb"},
            "annotations": {"aiadmit.dev/exempt": "untrusted-hardening"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u",
                                 "controller": True}]}


def _template() -> dict:
    return {"metadata": {"labels": {"app": "x", "notebook-name": "nb"}}, "spec": _pod_spec()}


def base_objects() -> list[dict]:
    """One object per family of kinds-table shapes: pod, template owners, replica maps, lists, inlined specs."""
    return [
        {"apiVersion": "v1", "kind": "Pod", "metadata": _meta("p"), "spec": _pod_spec()},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta("d"),
         "spec": {"replicas": 2, "template": _template()}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta("cj"),
         "spec": {"jobTemplate": {"spec": {"parallelism": 3, "template": _template()}}}},
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": _meta("pt"),
         "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": _template()},
                                          "Worker": {"replicas": 4, "template": _template()}}}},
        {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": _meta("nb"),
         "spec": {"template": {"spec": _pod_spec()}}},
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": _meta("rc"),
         "spec": {"headGroupSpec": {"template": _template()},
                  "workerGroupSpecs": [{"groupName": "g", "replicas": 2, "minReplicas": 1, "numOfHosts": 2,
                                        "template": _template()}]}},
        {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": _meta("is"),
         "spec": {"predictor": {"minReplicas": 1, "model": {"modelFormat": {"name": "x"}, "resources": {
             "limits": {"nvidia.com/gpu": 1}}}, **_pod_spec()}}},
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": _meta("tj"),
         "spec": {"trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}}},
        {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": _meta("lws"),
         "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "workerTemplate": _template(),
                                                          "leaderTemplate": _template()}}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": _meta("hpa"),
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                  "minReplicas": 1, "maxReplicas": 3}},
    ]


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every path to a node of `value` (the root included)."""
    out = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            out += _paths(inner, prefix + (key,))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            out += _paths(inner, prefix + (index,))
    return out


def _replace(document: object, path: tuple, value: object) -> object:
    if not path:
        return value
    node = document
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return document


@st.composite
def hostile_objects(draw) -> object:
    """A base object with 1-4 of its nodes (any depth, the root included) replaced by hostile values."""
    obj = copy.deepcopy(draw(st.sampled_from(base_objects())))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = _paths(obj)
        path = draw(st.sampled_from(paths))
        obj = _replace(obj, path, copy.deepcopy(draw(HOSTILE)))  # constants of HOSTILE must stay unchanged
        if not isinstance(obj, (dict, list)):
            break
    return obj


# ------------------------------------------------------------------------------------------------ reviews
OPERATIONS = st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH", "", None, 1])
SUBRESOURCES = st.sampled_from([None, "", "ephemeralcontainers", "status", "scale", 7])


@st.composite
def reviews(draw) -> dict:
    """An AdmissionReview v1 whose request carries a hostile object, and hostile fields around it."""
    obj = draw(hostile_objects())
    source = obj if isinstance(obj, dict) else {}
    version = source.get("apiVersion") if isinstance(source.get("apiVersion"), str) else "v1"
    group, _, ver = version.rpartition("/")
    kind = {"group": group, "version": ver, "kind": source.get("kind") if isinstance(source.get("kind"), str) else ""}
    request = {
        "uid": str(uuid.UUID(int=draw(st.integers(min_value=0, max_value=2 ** 128 - 1)))),
        "kind": copy.deepcopy(draw(st.one_of(st.just(kind), HOSTILE))),
        "resource": {"group": group, "version": ver, "resource": "pods"},
        "namespace": draw(st.one_of(st.sampled_from(["team", "tenant", "kube-system", "aiadmit-system", ""]), HOSTILE)),
        "name": draw(st.one_of(st.just("x"), HOSTILE)),
        "operation": draw(OPERATIONS),
        "userInfo": draw(st.one_of(
            st.just({"username": "system:serviceaccount:kube-system:replicaset-controller"}),
            st.just({"username": "alice"}), HOSTILE)),
        "object": obj,
        "oldObject": draw(st.one_of(st.none(), st.just(obj), hostile_objects())),
        "dryRun": draw(st.one_of(st.booleans(), HOSTILE)),
    }
    sub = draw(SUBRESOURCES)
    if sub is not None:
        request["subResource"] = sub
    # one copy of the whole: the objects drawn share no node with the strategies' constants or with each other
    return copy.deepcopy({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def review_body(review: dict) -> bytes:
    """As the API server would not, but a hostile client could: NaN and Infinity included (Python's json reads them)."""
    return json.dumps(review, allow_nan=True).encode()


# ------------------------------------------------------------------------------------------------ manifests
ANCHORED = [
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: &l {x: y}}\nspec:\n  containers:\n"
    "  - {name: c, image: i, env: &e [{name: A, value: b}]}\n  - {name: d, image: i, env: *e}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: &m {name: m}\nspec: {containers: [{<<: *m, image: i}]}\n",
    "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: q}, spec: 1}\n- 7\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: t}\nspec: {containers: [{name: c, image: '{{ .Values.x }}'}]}\n",
    "--- !!binary aGVsbG8=\n--- [1, 2]\n--- 'x'\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: r}\nspec: &s {containers: [*s]}\n",
]


try:
    import yaml as _yaml

    _DUMPER = getattr(_yaml, "CSafeDumper", _yaml.SafeDumper)
except ImportError:  # pragma: no cover - PyYAML is a dependency of aiadmit
    _DUMPER = None


@st.composite
def manifests(draw) -> str:
    """A YAML stream: hostile objects as YAML documents, with odd documents (anchors, lists, templates) mixed in."""
    import yaml

    documents = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        if draw(st.integers(min_value=0, max_value=4)) == 0:
            documents.append(draw(st.sampled_from(ANCHORED)))
            continue
        obj = draw(hostile_objects())
        try:
            documents.append(yaml.dump(obj, Dumper=_DUMPER, allow_unicode=True, width=10 ** 6))
        except RecursionError:  # PyYAML's representer recurses: nest beyond it as JSON, which is YAML too
            try:
                documents.append(json.dumps(obj, allow_nan=True))
            except (RecursionError, ValueError):
                documents.append("[" * 3000 + "]" * 3000)
    text = "\n---\n".join(documents)
    if draw(st.integers(min_value=0, max_value=9)) == 0:  # a cut in the middle: broken YAML
        text = text[:draw(st.integers(min_value=0, max_value=len(text)))]
    return text
