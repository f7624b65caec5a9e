"""Resource -> Workload: every pod template found from the kinds table, classified once.

The table (`kinds.yaml`) says where pods stand in each kind; this module only
walks it. Classification (accelerated, training, inference, notebook,
untrusted) happens here once per resource so that policies only match on it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator, Optional

from webhook.model import pointer as jp
from webhook.model.quantity import parse_quantity
from webhook.model.resource import Resource
from webhook.k8s.containers import (ShapeError, check_list_of_maps, check_metadata, copied_metadata, injected,
                                   readable)
from webhook.k8s.dra import IMPLICIT_PREFIX, undeclared
from webhook.k8s.kindnames import KINDS_FILE, table_data
from webhook.k8s.shape import TooLarge, searchable, template_entries, unlisted_name

AI_CLASSES = frozenset({"accelerated", "training", "inference", "notebook"})
ROLES = ("training", "inference", "notebook")


@dataclass(frozen=True)
class TemplateSpec:
    at: tuple[str, ...]
    spec: Optional[str]
    metadata: Optional[str]
    containers: tuple[str, ...]
    rename: tuple[tuple[str, str], ...]
    replicas: Optional[str]
    multiply: tuple[str, ...]
    subtract: int
    name: str
    default_replicas: int = 1
    min_replicas: Optional[str] = None
    subtract_if: Optional[str] = None
    injects: tuple[tuple[tuple[str, Any], ...], ...] = ()  # what the operator adds to a container (kinds.yaml)
    copies: tuple[str, ...] = ()  # maps whose labels and annotations the operator puts on the pods (kinds.yaml)


@dataclass(frozen=True)
class KindSpec:
    kind: str
    group: str
    role: Optional[str]
    accelerated_role: Optional[str]
    templates: tuple[TemplateSpec, ...]


def _template_spec(entry: dict) -> TemplateSpec:
    return TemplateSpec(
        at=tuple(jp.split(entry.get("at", ""))),
        spec=entry.get("spec", "template/spec"),
        metadata=entry.get("metadata", "template/metadata"),
        containers=tuple(entry.get("containers", ())),
        rename=tuple(sorted((entry.get("rename") or {}).items())),
        replicas=entry.get("replicas"),
        multiply=tuple(entry.get("multiply", ())),
        subtract=int(entry.get("subtract", 0)),
        name=entry.get("name", "template"),
        default_replicas=int(entry.get("defaultReplicas", 1)),
        min_replicas=entry.get("minReplicas"),
        subtract_if=entry.get("subtractIf"),
        injects=tuple(tuple(sorted(item.items())) for item in entry.get("injects", ())),
        copies=tuple(entry.get("copies", ())),
    )


@lru_cache(maxsize=None)
def kind_table(path: str = KINDS_FILE) -> dict[tuple[str, str], KindSpec]:
    data = table_data(path)
    table = {}
    for entry in data["kinds"]:
        spec = KindSpec(
            kind=entry["kind"],
            group=entry.get("group", ""),
            role=entry.get("role"),
            accelerated_role=entry.get("acceleratedRole"),
            templates=tuple(_template_spec(t) for t in entry.get("templates", ())),
        )
        table[(spec.group, spec.kind)] = spec
    return table


@dataclass
class Container:
    """One container as policies see it, with the pointer of the real field for messages and patches."""

    obj: dict
    pointer: str
    section: str  # containers | initContainers | <extra field name>
    rename: dict[str, str] = field(default_factory=dict)
    injected: list = field(default_factory=list)  # volumes an operator mounts in it (kinds.yaml `injects`)

    @property
    def name(self) -> str:
        """How messages name it: its `name`, else its field (KServe's `sklearn`, TrainJob's `trainer`), else its
        place (`containers[0]`)."""
        name = self.obj.get("name")
        if isinstance(name, str) and name:
            return name
        if self.section in ("containers", "initContainers"):
            return f"{self.section}[{self.pointer.rsplit('/', 1)[-1]}]"
        return self.section

    def field_pointer(self, rel: str) -> str:
        """Pointer of a field given relative to the container (``/resources/limits``), renames applied."""
        if self.rename:  # few containers have renamed fields (KServe's model); the rest append `rel` as it is
            tokens = jp.split(rel)
            if tokens and tokens[0] in self.rename:
                tokens[0] = self.rename[tokens[0]]
                return self.pointer + jp.tokens_join(tokens)
        return self.pointer + rel


@dataclass
class PodTemplate:
    name: str
    spec: Optional[dict]  # None: the kind has no pod spec here (TrainJob's trainer)
    spec_pointer: Optional[str]
    metadata: dict
    metadata_pointer: Optional[str]
    containers: list[Container]
    pod_count: int


@dataclass
class Workload:
    resource: Resource
    templates: list[PodTemplate]
    classes: frozenset[str]
    role: Optional[str]
    tier: Optional[str]
    devices: frozenset[str]
    pod_count: int
    errors: list[ShapeError] = field(default_factory=list)  # bad fields: each left out, the rest still checked
    unlisted: Optional[str] = None  # "Kind (group)" when not in the kinds table: templates found by shape

    @property
    def is_ai(self) -> bool:
        return bool(self.classes & AI_CLASSES)


@dataclass(frozen=True)
class Classification:
    """Settings of the classifier, from the config file's `classification` section."""

    accelerators: tuple[str, ...] = (
        "nvidia.com/gpu", "nvidia.com/mig-*", "nvidia.com/gpu.shared", "amd.com/gpu", "gpu.intel.com/*",
        "habana.ai/*", "aws.amazon.com/neuron*", "google.com/tpu",
    )
    # DRA device classes whose devices are accelerators (globs): a claim of any other class (a NIC, an IMEX channel)
    # holds no accelerator. A DeviceClass's implicit extended resource (deviceclass.resource.kubernetes.io/<class>)
    # is an accelerator when its class is one.
    device_classes: tuple[str, ...] = (
        "gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com", "gpu.amd.com", "gpu.intel.com", "*.gpu.intel.com",
        "neuron.aws.com", "tpu.google.com",
    )
    # Extended resources (globs) known not to be accelerators (a NIC's `rdma/hca`): while the DeviceClasses are
    # unknown they are not presumed to be ones (k8s/deviceclasses.py). A known DeviceClass of an accelerator class
    # naming one still makes it an accelerator. Empty by default: unknown is never "not a device".
    non_accelerators: tuple[str, ...] = ()
    tier_label: str = "aiadmit.dev/tier"
    role_label: str = "aiadmit.dev/role"
    notebook_label: str = "notebook-name"
    notebooks_are_untrusted: bool = True

    def is_accelerator(self, resource_name: str) -> bool:
        return _matches_accelerator(resource_name, self.accelerators, self.device_classes)


@lru_cache(maxsize=1024)
def _matches_accelerator(name: str, patterns: tuple[str, ...], device_classes: tuple[str, ...]) -> bool:
    if name.startswith(IMPLICIT_PREFIX):  # a DeviceClass's own extended resource: an accelerator if its class is one
        return any(fnmatch.fnmatchcase(name[len(IMPLICIT_PREFIX):], p) for p in device_classes)
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _expand(obj: Any, tokens: tuple[str, ...], prefix: tuple[str, ...] = (), bound: str = "") \
        -> Iterator[tuple[tuple[str, ...], Any, str]]:
    """Walk a pattern with '*' wildcards; yield (tokens, value, key the last wildcard matched)."""
    if not tokens:
        yield prefix, obj, bound
        return
    head, rest = tokens[0], tokens[1:]
    if head == "*":
        if isinstance(obj, dict):
            for key, value in obj.items():
                yield from _expand(value, rest, prefix + (str(key),), str(key))
        elif isinstance(obj, list):
            for position, value in enumerate(obj):
                # List items are named by `name` (JobSet replicatedJobs) or `groupName` (KubeRay worker groups).
                label = str(position)
                if isinstance(value, dict):
                    label = str(value.get("name") or value.get("groupName") or position)
                yield from _expand(value, rest, prefix + (str(position),), str(label))
    elif isinstance(obj, dict) and head in obj:
        yield from _expand(obj[head], rest, prefix + (head,), bound)
    elif isinstance(obj, list) and head.isdigit() and int(head) < len(obj):  # a concrete index (found by shape)
        yield from _expand(obj[int(head)], rest, prefix + (head,), bound)


def _count(obj: Any, base: str, rel: Optional[str], default: int = 1) -> int:
    if rel is None:
        return default
    value = jp.resolve(obj, jp.relative(base, rel))
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


_NO_RENAME: dict = {}  # shared by the containers of pod specs, which rename nothing; never written to


def _locate(resource: Resource, kind: KindSpec, errors: list[ShapeError], dropped: set[str],
            tick: Callable[[], None]) -> list[PodTemplate]:
    obj = resource.obj
    templates = []
    for spec in kind.templates:
        for tokens, owner, bound in _expand(obj, spec.at) if spec.at else (((), obj, ""),):  # at the top: itself
            tick()
            if not isinstance(owner, dict):
                continue
            base = jp.tokens_join(tokens) if tokens else ""
            name = spec.name.replace("{*}", bound)
            pod_spec, spec_pointer = None, None
            if spec.spec is not None:
                spec_pointer = jp.relative(base, spec.spec)
                pod_spec = jp.resolve(obj, spec_pointer)
                if pod_spec is None:
                    continue
                if not isinstance(pod_spec, dict):
                    errors.append(ShapeError(spec_pointer, f"pod spec of {name} must be a map"))
                    continue
            metadata, metadata_pointer = {}, None
            if spec.metadata is not None:
                metadata_pointer = jp.relative(base, spec.metadata)
                found = jp.resolve(obj, metadata_pointer)
                if found is not obj.get("metadata"):  # the object's own (a Pod's) was checked by build_workload
                    check_metadata(found, metadata_pointer)
                metadata = found if isinstance(found, dict) else {}
            if spec.copies:
                metadata = copied_metadata(obj, base, spec.copies, metadata)
            containers = []
            claimed = False  # some container names a DRA claim (resources.claims)
            if pod_spec is not None:
                for section in ("initContainers", "containers", "ephemeralContainers"):
                    items = pod_spec.get(section)
                    if items is None:
                        continue
                    try:
                        check_list_of_maps(items, f"{spec_pointer}/{section}", section)
                    except ShapeError as exc:
                        errors.append(exc)
                        continue
                    at = f"{spec_pointer}/{section}/"
                    for position, item in enumerate(items):
                        if not position % 256:
                            tick()
                        pointer = at + str(position)
                        view = readable(item, pointer, _NO_RENAME, errors, dropped)
                        resources = view.get("resources")
                        if resources and "claims" in resources:
                            claimed = True
                        containers.append(Container(view, pointer, section, _NO_RENAME,
                                                    injected(spec.injects, section, position, view)
                                                    if spec.injects else []))
                if claimed or "resourceClaims" in pod_spec:
                    errors.extend(undeclared(pod_spec, [(c.pointer, c.obj) for c in containers]))
                volumes = pod_spec.get("volumes")
                if volumes is not None:
                    try:
                        check_list_of_maps(volumes, f"{spec_pointer}/volumes", "volumes")
                    except ShapeError as exc:
                        errors.append(exc)
                        pod_spec = {k: v for k, v in pod_spec.items() if k != "volumes"}
            rename = dict(spec.rename)
            for extra in spec.containers:
                pointer = jp.relative(base, extra)
                item = jp.resolve(obj, pointer)
                if item is None:
                    continue
                if not isinstance(item, dict):
                    errors.append(ShapeError(pointer, f"{extra} must be a map"))
                    continue
                view = readable(item, pointer, rename, errors, dropped)
                if rename:
                    view = dict(view)
                    for alias, real in rename.items():
                        view[alias] = view.get(real)
                        view.pop(real, None)
                    view = {k: v for k, v in view.items() if v is not None}
                containers.append(Container(view, pointer, extra, rename))
            if pod_spec is None and not containers:
                continue
            count = _count(obj, base, spec.replicas, spec.default_replicas)
            if spec.min_replicas is not None:
                count = max(count, _count(obj, base, spec.min_replicas, 0))
            replicas = count
            for factor in spec.multiply:
                count *= _count(obj, base, factor)
            if spec.subtract and (spec.subtract_if is None
                                  or jp.resolve(obj, jp.relative(base, spec.subtract_if)) is not None):
                count = max(count - spec.subtract * replicas, 0)
            templates.append(PodTemplate(name, pod_spec, spec_pointer, metadata, metadata_pointer, containers, count))
    return templates


def _devices(templates: list[PodTemplate], classification: Classification) -> frozenset[str]:
    found = set()
    for template in templates:
        for container in template.containers:
            resources = container.obj.get("resources") or {}
            for section in ("limits", "requests"):
                for name in resources.get(section) or {}:
                    if classification.is_accelerator(str(name)):
                        found.add(str(name))
    return frozenset(found)


def template_devices(template: PodTemplate, classification: Classification) -> list[str]:
    """Accelerator resources that some container of the template asks for in a non-zero quantity."""
    found = set()
    for container in template.containers:
        resources = container.obj.get("resources") or {}
        for section in ("limits", "requests"):
            for name, quantity in (resources.get(section) or {}).items():
                # a Fraction's sign is its numerator's: the test without Fraction's comparison in Python
                if classification.is_accelerator(str(name)) and parse_quantity(quantity).numerator > 0:
                    found.add(str(name))
    return sorted(found)


def effective_tier(own: Any, namespace: Any, templates: Iterable[Any] = ()) -> Optional[str]:
    """The tier that governs an object: its namespace's, which its own labels may raise but never lower.

    Only `untrusted` has a meaning to the policies, so raising means: `untrusted` said anywhere (the namespace,
    the object, one of its pod templates, whose pods will carry it) wins; otherwise the namespace's tier, and the
    object's own only where the namespace says none (or is not known).
    """
    said = [t for t in (namespace, own, *templates) if isinstance(t, str) and t]
    if "untrusted" in said:
        return "untrusted"
    if isinstance(namespace, str) and namespace:
        return namespace
    return own if isinstance(own, str) and own else None


def no_tick() -> None:
    return None


def build_workload(resource: Resource, classification: Classification,
                   namespace_labels: Optional[dict] = None,
                   tick: Callable[[], None] = no_tick) -> Optional[Workload]:
    """The workload view of a resource, or None when the kind bears no pods.

    A kind the table does not list is searched for pod specs by shape (webhook/k8s/shape.py); the workload then
    says so in `unlisted`. A field aiadmit cannot read (a quantity that is not one, a list that is a string) is left
    out of the view rules read and listed in `errors`: the rest of the resource is still checked. Raises ShapeError
    only when nothing of it can be read (metadata, labels or annotations that are not maps of strings, an unlisted
    kind too large to search). `tick` is called per template and every 256 containers: the engine's deadline check
    (an object may have 30,000 containers), raising to stop.
    """
    check_metadata(resource.obj.get("metadata"), "/metadata")  # of every kind: exemptions are read from it
    kind = kind_table().get((resource.group, resource.kind))
    unlisted = None
    if kind is None:
        if not searchable(resource.group, resource.kind):
            return None
        try:
            entries = template_entries(resource.obj)
        except TooLarge as exc:
            raise ShapeError("", f"{resource.kind} is not in the kinds table and is too large to search for pod "
                                 f"templates ({exc})") from None
        if not entries:
            return None
        unlisted = unlisted_name(resource.group, resource.kind)
        kind = KindSpec(resource.kind, resource.group, None, None, tuple(_template_spec(e) for e in entries))
    errors: list[ShapeError] = []
    dropped: set[str] = set()
    templates = _locate(resource, kind, errors, dropped, tick)
    # A device whose quantity is unreadable still makes the workload accelerated: its name is what classifies it.
    devices = _devices(templates, classification) | {d for d in dropped if classification.is_accelerator(d)}
    claims = any(t.spec and t.spec.get("resourceClaims") for t in templates)
    classes = {"pod"}
    if devices or claims:
        classes.add("accelerated")

    labels = resource.labels
    template_labels = [t.metadata.get("labels") or {} for t in templates]
    role = kind.role or (kind.accelerated_role if "accelerated" in classes else None)
    # A notebook by its kind or by the Kubeflow label (on the object or a template) stays one: the role label may
    # name a role, never take the notebook's away (it would take `untrusted` with it). A kind's fixed role is never
    # relabelled either (a PyTorchJob labelled `inference` would take serving priority classes): the label only
    # overrides a guess (an accelerated Deployment's `inference`) or names a role where the kind has none.
    notebook = role == "notebook" or classification.notebook_label in labels or any(
        classification.notebook_label in t for t in template_labels)
    override = labels.get(classification.role_label)
    if notebook:
        role = "notebook"
    elif override in ROLES and kind.role is None:
        role = override
    if role:
        classes.add(role)

    tier = effective_tier(labels.get(classification.tier_label),
                          (namespace_labels or {}).get(classification.tier_label),
                          [t.get(classification.tier_label) for t in template_labels])
    if tier == "untrusted" or (role == "notebook" and classification.notebooks_are_untrusted):
        classes.add("untrusted")
    if classes & AI_CLASSES:
        classes.add("ai")
    pod_count = sum(t.pod_count for t in templates)
    return Workload(resource, templates, frozenset(classes), role, tier, devices, pod_count, errors, unlisted)
