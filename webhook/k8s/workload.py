"""Resource -> Workload: every pod template found from the kinds table, classified once.

The table (`kinds.yaml`, read by k8s/kindtable.py) says where pods stand in each
kind; k8s/podtemplates.py walks it over the resource. Classification
(accelerated, training, inference, notebook, untrusted) happens here once per
resource so that policies only match on it.
"""

from __future__ import annotations

from functools import cached_property, lru_cache
from typing import Any, Callable, Iterable, Optional

from webhook.model.quantity import parse_quantity, plain_count
from webhook.model.resource import Resource
from webhook.k8s.containers import ShapeError, check_metadata
from webhook.k8s.dra import IMPLICIT_PREFIX
from webhook.k8s.kindtable import KindSpec, TemplateSpec, kind_table, template_spec
from webhook.k8s.podtemplates import Container, PodTemplate, locate, no_tick
from webhook.k8s.shape import TooLarge, searchable, template_entries, unlisted_name
from webhook.model.valueclass import Compared, Frozen
from webhook.model.globs import any_matches

__all__ = ["AI_CLASSES", "ROLES", "Classification", "Container", "KindSpec", "PodTemplate", "ShapeError",
           "TemplateSpec", "Workload", "build_workload", "effective_tier", "kind_table", "no_tick",
           "template_devices"]

AI_CLASSES = frozenset({"accelerated", "training", "inference", "notebook"})
ROLES = ("training", "inference", "notebook")


class Workload:
    resource: Resource
    templates: list[PodTemplate]
    classes: frozenset[str]
    role: Optional[str]
    tier: Optional[str]
    devices: frozenset[str]
    pod_count: int
    errors: list[ShapeError]  # bad fields: each left out, the rest still checked
    unlisted: Optional[str] = None  # "Kind (group)" when not in the kinds table: templates found by shape

    def __init__(self, resource: Resource, templates: list[PodTemplate], classes: frozenset[str], role: Optional[str],
                 tier: Optional[str], devices: frozenset[str], pod_count: int, errors: list[ShapeError] | None = None,
                 unlisted: Optional[str] = None) -> None:
        self.resource = resource
        self.templates = templates
        self.classes = classes
        self.role = role
        self.tier = tier
        self.devices = devices
        self.pod_count = pod_count
        self.errors = [] if errors is None else errors
        self.unlisted = unlisted

    @property
    def is_ai(self) -> bool:
        return bool(self.classes & AI_CLASSES)


class Classification(Frozen, Compared):
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

    def __init__(self, accelerators: tuple[str, ...] = accelerators, device_classes: tuple[str, ...] = device_classes,
                 non_accelerators: tuple[str, ...] = (), tier_label: str = "aiadmit.dev/tier",
                 role_label: str = "aiadmit.dev/role", notebook_label: str = "notebook-name",
                 notebooks_are_untrusted: bool = True) -> None:
        # (the two tuples' defaults are the class attributes above, read when this function is defined)
        object.__setattr__(self, "accelerators", accelerators)
        object.__setattr__(self, "device_classes", device_classes)
        object.__setattr__(self, "non_accelerators", non_accelerators)
        object.__setattr__(self, "tier_label", tier_label)
        object.__setattr__(self, "role_label", role_label)
        object.__setattr__(self, "notebook_label", notebook_label)
        object.__setattr__(self, "notebooks_are_untrusted", notebooks_are_untrusted)

    def _compared(self) -> tuple:
        """The fields `==` compares and the hash digests."""
        return (self.accelerators, self.device_classes, self.non_accelerators, self.tier_label, self.role_label,
                self.notebook_label, self.notebooks_are_untrusted)

    def is_accelerator(self, resource_name: str) -> bool:
        known = self._accelerators
        found = known.get(resource_name)
        if found is None:
            found = _matches_accelerator(resource_name, self.accelerators, self.device_classes)
            if len(known) < 1024:  # names come from the input: the memo stays bounded
                known[resource_name] = found
        return found

    @cached_property
    def _accelerators(self) -> dict[str, bool]:
        """Resource name -> is_accelerator, for this classification: asked for every quantity of every review."""
        return {}


@lru_cache(maxsize=1024)
def _matches_accelerator(name: str, patterns: tuple[str, ...], device_classes: tuple[str, ...]) -> bool:
    if name.startswith(IMPLICIT_PREFIX):  # a DeviceClass's own extended resource: an accelerator if its class is one
        return any_matches(name[len(IMPLICIT_PREFIX):], device_classes)
    return any_matches(name, patterns)


def _devices(templates: list[PodTemplate], classification: Classification) -> frozenset[str]:
    found = set()
    known = classification._accelerators  # is_accelerator's memo, asked first without a call
    for template in templates:
        for container in template.containers:
            resources = container.obj.get("resources")
            if not resources:
                continue
            for section in ("limits", "requests"):
                for name in resources.get(section) or ():
                    name = str(name)
                    accelerator = known.get(name)
                    if accelerator is None:
                        accelerator = classification.is_accelerator(name)
                    if accelerator:
                        found.add(name)
    return frozenset(found)


def template_devices(template: PodTemplate, classification: Classification) -> list[str]:
    """Accelerator resources that some container of the template asks for in a non-zero quantity."""
    found = set()
    known = classification._accelerators
    for container in template.containers:
        resources = container.obj.get("resources")
        if not resources:
            continue
        for section in ("limits", "requests"):
            values = resources.get(section)
            if not values:
                continue
            for name, quantity in values.items():
                name = str(name)
                accelerator = known.get(name)
                if accelerator is None:
                    accelerator = classification.is_accelerator(name)
                if not accelerator:
                    continue
                count = plain_count(quantity)
                # a Fraction's sign is its numerator's: the test without Fraction's comparison in Python
                if (count if count is not None else parse_quantity(quantity).numerator) > 0:
                    found.add(name)
    return sorted(found)


def effective_tier(own: Any, namespace: Any, templates: Iterable[Any] = ()) -> Optional[str]:
    """The tier that governs an object: its namespace's, which its own labels may raise but never lower.

    Only `untrusted` has a meaning to the policies, so raising means: `untrusted` said anywhere (the namespace,
    the object, one of its pod templates, whose pods will carry it) wins; otherwise the namespace's tier, and the
    object's own only where the namespace says none (or is not known).
    """
    if namespace == "untrusted" or own == "untrusted" or "untrusted" in templates:  # said anywhere
        return "untrusted"
    if isinstance(namespace, str) and namespace:
        return namespace
    return own if isinstance(own, str) and own else None


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
        kind = KindSpec(resource.kind, resource.group, None, None, tuple(template_spec(e) for e in entries))
    errors: list[ShapeError] = []
    dropped: set[str] = set()
    templates = locate(resource, kind, errors, dropped, tick)
    # A device whose quantity is unreadable still makes the workload accelerated: its name is what classifies it.
    devices = _devices(templates, classification)
    if dropped:
        devices |= {d for d in dropped if classification.is_accelerator(d)}
    # One pass over the templates for what classifying reads of them (once per review: loops, not comprehensions).
    claims = False  # some template's pod declares DRA claims
    labelled_notebook = False  # some template carries the notebook label
    template_tiers = []
    pod_count = 0
    notebook_label, tier_label = classification.notebook_label, classification.tier_label
    for template in templates:
        if not claims and template.spec and template.spec.get("resourceClaims"):
            claims = True
        template_labels = template.metadata.get("labels") or {}
        if notebook_label in template_labels:
            labelled_notebook = True
        template_tiers.append(template_labels.get(tier_label))
        pod_count += template.pod_count
    classes = {"pod"}
    if devices or claims:
        classes.add("accelerated")

    labels = resource.labels
    role = kind.role or (kind.accelerated_role if "accelerated" in classes else None)
    # A notebook by its kind or by the Kubeflow label (on the object or a template) stays one: the role label may
    # name a role, never take the notebook's away (it would take `untrusted` with it). A kind's fixed role is never
    # relabelled either (a PyTorchJob labelled `inference` would take serving priority classes): the label only
    # overrides a guess (an accelerated Deployment's `inference`) or names a role where the kind has none.
    notebook = role == "notebook" or notebook_label in labels or labelled_notebook
    override = labels.get(classification.role_label)
    if notebook:
        role = "notebook"
    elif override in ROLES and kind.role is None:
        role = override
    if role:
        classes.add(role)

    tier = effective_tier(labels.get(tier_label), (namespace_labels or {}).get(tier_label), template_tiers)
    if tier == "untrusted" or (role == "notebook" and classification.notebooks_are_untrusted):
        classes.add("untrusted")
    if classes & AI_CLASSES:
        classes.add("ai")
    return Workload(resource, templates, frozenset(classes), role, tier, devices, pod_count, errors, unlisted)
