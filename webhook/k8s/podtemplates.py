"""Resource -> its pod templates: the kinds table's entries walked over one object, its containers read.

Once per template of every review, so the walk reads each place from the node the
template stands at (its pointers were split at load, k8s/kindtable.py) rather than
from the top of the object, and checks each container's shape once. A place that
climbs (`../../replicas`), or a template reached through a map key that is not a
string (a YAML `1:`), is resolved from the top as written: the answer is the same
either way, this is only the shorter road.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional

from webhook.model import pointer as jp
from webhook.model.resource import Resource
from webhook.k8s.containers import ShapeError, check_metadata, copied_metadata, injected, list_of_maps_problem, readable
from webhook.k8s.dra import undeclared
from webhook.k8s.kindtable import KindSpec, Rel

SECTIONS = ("initContainers", "containers", "ephemeralContainers")


class Container:
    """One container as policies see it, with the pointer of the real field for messages and patches."""

    obj: dict
    pointer: str
    section: str  # containers | initContainers | <extra field name>
    rename: dict[str, str]
    injected: list  # volumes an operator mounts in it (kinds.yaml `injects`)

    def __init__(self, obj: dict, pointer: str, section: str, rename: dict[str, str] | None = None,
                 injected: list | None = None) -> None:
        self.obj = obj
        self.pointer = pointer
        self.section = section
        self.rename = {} if rename is None else rename
        self.injected = [] if injected is None else injected

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


class PodTemplate:
    name: str
    spec: Optional[dict]  # None: the kind has no pod spec here (TrainJob's trainer)
    spec_pointer: Optional[str]
    metadata: dict
    metadata_pointer: Optional[str]
    containers: list[Container]
    pod_count: int

    def __init__(self, name: str, spec: Optional[dict], spec_pointer: Optional[str], metadata: dict,
                 metadata_pointer: Optional[str], containers: list[Container], pod_count: int) -> None:
        self.name = name
        self.spec = spec
        self.spec_pointer = spec_pointer
        self.metadata = metadata
        self.metadata_pointer = metadata_pointer
        self.containers = containers
        self.pod_count = pod_count


def expand(node: Any, steps: tuple[tuple[str, str], ...], base: str = "", bound: str = "", faithful: bool = True) \
        -> Iterable[tuple[str, Any, str, bool]]:
    """Walk a pattern with '*' wildcards: (pointer, value, key the last wildcard matched, faithful) for each place.

    Concrete steps are followed in a loop, a wildcard's items one by one (lazily: the caller ticks between them).
    `faithful`: the pointer, resolved from the top, reaches this same value (false once a wildcard went through a
    map key that is not a string, which the pointer's text cannot name)."""
    for index, (head, escaped) in enumerate(steps):
        if head == "*":
            return _wildcard(node, steps[index + 1:], base, faithful)
        if isinstance(node, dict) and head in node:
            node = node[head]
        elif isinstance(node, list) and head.isdigit() and int(head) < len(node):  # a concrete index (by shape)
            node = node[int(head)]
        else:
            return ()
        base += escaped
    return ((base, node, bound, faithful),)


def _wildcard(node: Any, rest: tuple[tuple[str, str], ...], base: str, faithful: bool) \
        -> Iterator[tuple[str, Any, str, bool]]:
    """The places under each item of a wildcard's map or list (`rest`: the steps after the wildcard)."""
    if isinstance(node, dict):
        for key, value in node.items():
            label = str(key)
            pointer = base + "/" + (jp.escape(label) if "~" in label or "/" in label else label)
            if rest:
                yield from expand(value, rest, pointer, label, faithful and type(key) is str)
            else:
                yield pointer, value, label, faithful and type(key) is str
    elif isinstance(node, list):
        for position, value in enumerate(node):
            # List items are named by `name` (JobSet replicatedJobs) or `groupName` (KubeRay worker groups).
            label = str(position)
            if isinstance(value, dict):
                label = str(value.get("name") or value.get("groupName") or position)
            if rest:
                yield from expand(value, rest, f"{base}/{position}", label, faithful)
            else:
                yield f"{base}/{position}", value, label, faithful


def _at(obj: dict, owner: Any, base: str, place: Rel, faithful: bool) -> tuple[str, Any]:
    """The pointer of a relative place and its value (None when absent), as `jp.resolve` reads it from the top."""
    down = place.down
    if down is None or not faithful:
        pointer = jp.relative(base, place.text)
        return pointer, jp.resolve(obj, pointer)
    node = owner
    for token in down:
        if isinstance(node, dict):
            node = node.get(token)  # absent: None, as a null there reads (the next step or the end says None)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return base + place.suffix, None
    return base + place.suffix, node


def _count(obj: dict, owner: Any, base: str, place: Optional[Rel], faithful: bool, default: int = 1) -> int:
    if place is None:
        return default
    value = _at(obj, owner, base, place, faithful)[1]
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def _maps(items: Any) -> bool:
    """Whether `items` is a list of maps (list_of_maps_problem says what is wrong otherwise)."""
    if not isinstance(items, list):
        return False
    for item in items:
        if not isinstance(item, dict):
            return False
    return True


def no_tick() -> None:
    """The deadline check when there is none (the walk then skips the call)."""
    return None


_NO_RENAME: dict = {}  # shared by the containers of pod specs, which rename nothing; never written to


def locate(resource: Resource, kind: KindSpec, errors: list[ShapeError], dropped: set[str],
           tick: Callable[[], None]) -> list[PodTemplate]:
    """Every pod template of `resource` that `kind`'s entries find; bad fields go to `errors` (the quantities'
    names to `dropped`). `tick` is called per template and every 256 containers (the engine's deadline)."""
    obj = resource.obj
    templates = []
    ticking = tick is not no_tick
    for spec in kind.templates:
        for base, owner, bound, faithful in expand(obj, spec.steps):
            if ticking:
                tick()
            if not isinstance(owner, dict):
                continue
            name = spec.name.replace("{*}", bound)
            pod_spec, spec_pointer = None, None
            if spec.spec_rel is not None:
                spec_pointer, pod_spec = _at(obj, owner, base, spec.spec_rel, faithful)
                if pod_spec is None:
                    continue
                if not isinstance(pod_spec, dict):
                    errors.append(ShapeError(spec_pointer, f"pod spec of {name} must be a map"))
                    continue
            metadata, metadata_pointer = {}, None
            if spec.metadata_rel is not None:
                metadata_pointer, found = _at(obj, owner, base, spec.metadata_rel, faithful)
                if found is not None and found is not obj.get("metadata"):  # a Pod's own was checked already
                    check_metadata(found, metadata_pointer)
                metadata = found if isinstance(found, dict) else {}
            if spec.copies:
                metadata = copied_metadata(obj, base, spec.copies, metadata)
            containers = []
            if pod_spec is not None:
                claimed = False  # some container names a DRA claim (resources.claims)
                for section in SECTIONS:
                    items = pod_spec.get(section)
                    if items is None:
                        continue
                    if not _maps(items):
                        errors.append(list_of_maps_problem(items, f"{spec_pointer}/{section}", section))
                        continue
                    at = f"{spec_pointer}/{section}/"
                    for position, item in enumerate(items):
                        if ticking and not position % 256:
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
                if volumes is not None and not _maps(volumes):
                    errors.append(list_of_maps_problem(volumes, f"{spec_pointer}/volumes", "volumes"))
                    pod_spec = {k: v for k, v in pod_spec.items() if k != "volumes"}
            if spec.container_rels:
                rename = dict(spec.rename)
                for extra, place in zip(spec.containers, spec.container_rels):
                    pointer, item = _at(obj, owner, base, place, faithful)
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
            count = _count(obj, owner, base, spec.replicas_rel, faithful, spec.default_replicas)
            if spec.min_replicas_rel is not None:
                count = max(count, _count(obj, owner, base, spec.min_replicas_rel, faithful, 0))
            replicas = count
            for factor in spec.multiply_rels:
                count *= _count(obj, owner, base, factor, faithful)
            if spec.subtract and (spec.subtract_if_rel is None
                                  or _at(obj, owner, base, spec.subtract_if_rel, faithful)[1] is not None):
                count = max(count - spec.subtract * replicas, 0)
            templates.append(PodTemplate(name, pod_spec, spec_pointer, metadata, metadata_pointer, containers, count))
    return templates
