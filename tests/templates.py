"""Every pod-template location of every kind in webhook/k8s/kinds.yaml, as objects the adversarial suite fills.

`locations()` yields one `Location` per template entry of the kinds table; `Location.build(spec, ...)` makes the
smallest object of that kind with `spec` (a pod spec) standing there, so a variant written once (a device path, an
escape) is tried at every place a pod can hide. The table is read, not copied: a kind or location added there is
tried here with no edit. `Location.check(workload)` says whether the engine found the pod spec where it was put (the
generator's own test).
"""

import copy
from dataclasses import dataclass
from typing import Optional

from webhook.k8s.workload import KindSpec, TemplateSpec, kind_table
from webhook.model import pointer as jp
from webhook.model.facts import OfflineFacts
from webhook.model.resource import Resource

VERSIONS = {"": "v1", "apps": "apps/v1", "batch": "batch/v1"}


@dataclass(frozen=True)
class Location:
    kind: KindSpec
    template: TemplateSpec

    @property
    def name(self) -> str:
        where = "/".join(self.template.at) or "."
        return f"{self.kind.kind}.{self.kind.group or 'core'}:{where}"

    @property
    def has_pod_spec(self) -> bool:
        return self.template.spec is not None

    @property
    def has_metadata(self) -> bool:
        return self.template.metadata is not None or bool(getattr(self.template, 'copies', ()))

    def _owner_tokens(self) -> list[str]:
        tokens, previous = [], ""
        for token in self.template.at:
            if token == "*":  # a map of replica specs (PyTorchJob's Worker) or a list (JobSet's replicatedJobs)
                token = "Worker" if previous.endswith("ReplicaSpecs") else "0"
            tokens.append(token)
            previous = token
        return tokens

    def build(self, spec: dict, namespace: str = "team", labels: Optional[dict] = None,
              pod_labels: Optional[dict] = None, pod_annotations: Optional[dict] = None,
              owner: Optional[dict] = None, name: str = "x") -> dict:
        """The object with `spec` at this location (its containers only, where the kind keeps no pod spec here)."""
        group = self.kind.group
        obj: dict = {"apiVersion": VERSIONS.get(group, f"{group}/v1"), "kind": self.kind.kind,
                     "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})}}
        if owner:
            obj["metadata"]["ownerReferences"] = [owner]
        base = "/" + "/".join(self._owner_tokens()) if self.template.at else ""
        _ensure(obj, base)
        spec = copy.deepcopy(spec)
        if self.template.spec is not None:
            _put(obj, jp.relative(base, self.template.spec), spec)
        else:  # TrainJob's trainer: one container with renamed fields
            container = dict(spec["containers"][0])
            for alias, real in self.template.rename:
                if alias in container:
                    container[real] = container.pop(alias)
            _put(obj, jp.relative(base, self.template.containers[0]), container)
        meta = {k: v for k, v in (("labels", pod_labels), ("annotations", pod_annotations)) if v}
        if meta:
            if self.template.metadata is not None:
                _put(obj, jp.relative(base, self.template.metadata), meta)
            elif getattr(self.template, 'copies', ()):  # KServe: the component's own labels/annotations reach its pods
                target = jp.resolve(obj, jp.relative(base, getattr(self.template, 'copies', ())[-1]))
                target.update(copy.deepcopy(meta))
        if "workerGroupSpecs" in base:  # KubeRay's worker groups default to no replicas
            _ensure(obj, base)["replicas"] = 1
        return obj

    def spec_pointer(self) -> Optional[str]:
        if self.template.spec is None:
            return None
        base = "/" + "/".join(self._owner_tokens()) if self.template.at else ""
        return jp.relative(base, self.template.spec)

    def check(self, workload) -> bool:
        pointer = self.spec_pointer()
        if pointer is None:
            return any(t.spec is None and t.containers for t in workload.templates)
        return any(t.spec_pointer == pointer for t in workload.templates)


def _ensure(obj: dict, pointer: str) -> dict:
    node = obj
    for token in jp.split(pointer):
        if isinstance(node, list):
            index = int(token)
            while len(node) <= index:
                node.append({"name": f"t{len(node)}"})
            node = node[index]
            continue
        if token not in node:
            node[token] = [] if token in ("replicatedJobs", "tasks", "workerGroupSpecs", "runtimePatches") else {}
        node = node[token]
    return node


def _put(obj: dict, pointer: str, value: dict) -> None:
    tokens = jp.split(pointer)
    if not tokens:
        obj.update(value)
        return
    parent = _ensure(obj, jp.join("", *tokens[:-1]))
    if tokens[-1] in parent and isinstance(parent[tokens[-1]], dict):
        parent[tokens[-1]].update(value)
    else:
        parent[tokens[-1]] = value


def locations() -> list[Location]:
    return [Location(kind, template) for kind in kind_table().values() for template in kind.templates]


def first_location(group: str, kind: str) -> Location:
    spec = kind_table()[(group, kind)]
    return Location(spec, spec.templates[0])


def untrusted_facts(namespace: str = "tenant") -> OfflineFacts:
    """Facts that know one namespace, of tier untrusted."""
    return OfflineFacts([Resource({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": namespace, "labels": {"aiadmit.dev/tier": "untrusted"}}})])


def judges(policy, kind: str) -> bool:
    """Whether `policy` judges objects of `kind` at all (its match names the kind or does not exclude it)."""
    return kind not in policy.match.exclude_kinds and (not policy.match.kinds or kind in policy.match.kinds)
