"""The walk over a resource reads each place from the node its template stands at (k8s/podtemplates.py): every
pointer it reports must name, read from the top of the object, exactly the value it read there."""

import pytest

from templates import locations
from webhook.k8s.kindtable import rel
from webhook.k8s.workload import Classification, build_workload
from webhook.model import pointer as jp
from webhook.model.resource import Resource

SPEC = {"containers": [{"name": "main", "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        "initContainers": [{"name": "init", "image": "img:1"}]}


def _agrees(obj: dict) -> list:
    workload = build_workload(Resource(obj), Classification())
    assert workload is not None and workload.templates
    for template in workload.templates:
        if template.spec is not None:
            assert jp.resolve(obj, template.spec_pointer) is template.spec
        for container in template.containers:
            if not container.rename:  # a renamed container's view is a copy with its fields' aliases
                assert jp.resolve(obj, container.pointer) is container.obj
    return workload.templates


@pytest.mark.parametrize("location", locations(), ids=lambda location: location.name)
def test_every_pointer_of_every_kind_names_what_was_read(location):
    obj = location.build(SPEC, pod_labels={"app": "x"})
    _agrees(obj)
    assert location.check(build_workload(Resource(obj), Classification()))


def test_keys_that_need_escaping_keep_their_pointers():
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"}, "spec": {
        "pytorchReplicaSpecs": {"a/b~c": {"replicas": 2, "template": {"spec": SPEC}}}}}
    [template] = _agrees(obj)
    assert template.spec_pointer == "/spec/pytorchReplicaSpecs/a~1b~0c/template/spec"
    assert template.name == "a/b~c" and template.pod_count == 2


def test_a_place_that_climbs_is_read_from_the_top():
    # JobSet's replica count is two levels above its pod template (`../../replicas`).
    obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "x"}, "spec": {
        "replicatedJobs": [{"name": "workers", "replicas": 3, "template": {"spec": {
            "parallelism": 2, "template": {"spec": SPEC}}}}]}}
    [template] = _agrees(obj)
    assert template.name == "workers" and template.pod_count == 6


def test_relative_pointers_are_split_as_relative_reads_them():
    for text in ("template/spec", "", ".", "./spec", "a~1b/c~0d", "/spec", "../replicas", "../../metadata"):
        place = rel(text)
        if place.down is None:
            assert ".." in text.split("/")
        else:
            assert jp.relative("/base/x", text) == "/base/x" + place.suffix
            assert jp.split(place.suffix) == list(place.down)
