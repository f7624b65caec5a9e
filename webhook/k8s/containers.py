"""What rules may read of one container: its fields as written, less those aiadmit cannot read.

A container whose quantity is a placeholder (`$GPU_PER_NODE`) or whose `env` is a
string is still a container: the unreadable field is reported as an input error at
its own pointer and left out of the view the policies read, so every other rule
still runs on the rest of the resource. This module also says what an operator
mounts in a container (kinds.yaml `injects`), which the view carries as `injected`.
"""

from __future__ import annotations

from typing import Any, Optional

from webhook.model import pointer as jp
from webhook.model.quantity import QuantityError, parse_quantity, plain_count


class ShapeError(ValueError):
    """A field of the wrong type where Kubernetes expects a certain shape."""

    def __init__(self, pointer: str, message: str):
        super().__init__(message)
        self.pointer = pointer
        self.message = message


def list_of_maps_problem(value: Any, pointer: str, what: str) -> Optional[ShapeError]:
    """What is wrong with `value` where Kubernetes expects a list of maps, or None (an absent field included).

    Returned, never raised: every caller keeps it among a workload's errors, and a raised one would keep its
    traceback, whose frames hold those errors again - a cycle only the cyclic collector frees, which the server
    pauses during a review (webhook/app/server.py's Held)."""
    if value is None:
        return None
    if not isinstance(value, list):
        return ShapeError(pointer, f"{what} must be a list, not {type(value).__name__}")
    for position, item in enumerate(value):
        if not isinstance(item, dict):
            return ShapeError(f"{pointer}/{position}", f"{what} items must be maps, not {type(item).__name__}")
    return None


_READ_QUANTITIES: set = set()  # strings already parsed as quantities: a review's pods repeat a few dozen sizes


def _quantity_problem(quantity: Any) -> Any:
    """Why `quantity` is no Kubernetes quantity, or None; a string that parsed once is not parsed again."""
    if type(quantity) is str and quantity in _READ_QUANTITIES:
        return None
    if plain_count(quantity) is None:  # a plain count ("1", 8) is a quantity: no Fraction built (model/quantity.py)
        try:
            parse_quantity(quantity)
        except QuantityError as exc:
            return str(exc)
    if type(quantity) is str and len(_READ_QUANTITIES) < 4096:
        _READ_QUANTITIES.add(quantity)
    return None


def _container_problems(container: dict, pointer: str, rename: dict[str, str]) -> list[tuple[ShapeError, tuple]]:
    """Each field of a container aiadmit cannot read, with the path (real field names) to leave out of its view.

    Once per container of every review: pointers and errors are built only for a field that has a problem."""
    problems: list[tuple[ShapeError, tuple]] = []
    get = container.get
    resources_field = rename.get("resources", "resources") if rename else "resources"
    resources = get(resources_field)
    if resources is not None:
        if not isinstance(resources, dict):
            problems.append((ShapeError(f"{pointer}/{jp.escape(resources_field)}",
                                        f"resources must be a map, not {type(resources).__name__}"),
                             (resources_field,)))
            resources = {}
        for section in ("requests", "limits"):
            values = resources.get(section)
            if values is None:
                continue
            if not isinstance(values, dict):
                problems.append((ShapeError(f"{pointer}/{jp.escape(resources_field)}/{section}",
                                            f"resources.{section} must be a map"), (resources_field, section)))
                continue
            for name, quantity in values.items():
                if type(quantity) is str and quantity in _READ_QUANTITIES:  # the common case, without a call
                    continue
                why = _quantity_problem(quantity)
                if why is not None:
                    problems.append((ShapeError(f"{pointer}/{jp.escape(resources_field)}/{section}/{jp.escape(name)}",
                                                why), (resources_field, section, name)))
    for list_field in ("volumeMounts", "env", "envFrom", "ports"):
        value = get(list_field)
        if value is None:
            continue
        if isinstance(value, list):  # a list of maps, the common case, is told without a call
            for entry in value:
                if not isinstance(entry, dict):
                    break
            else:
                continue
        problem = list_of_maps_problem(value, f"{pointer}/{list_field}", list_field)  # what is wrong, and where
        if problem is not None:
            problems.append((problem, (list_field,)))
    for str_list in ("command", "args"):
        value = get(str_list)
        if value is not None and not isinstance(value, list):
            problems.append((ShapeError(f"{pointer}/{str_list}", f"{str_list} must be a list of strings"), (str_list,)))
    return problems


def _without(obj: dict, paths: list[tuple]) -> dict:
    """A copy of `obj` with each path left out, copying only the maps on the way (everything else is shared)."""
    out = dict(obj)
    for path in paths:
        node = out
        for token in path[:-1]:
            child = node.get(token)
            if not isinstance(child, dict):
                break
            node[token] = node = dict(child)
        else:
            node.pop(path[-1], None)
    return out


def readable(item: dict, pointer: str, rename: dict[str, str], errors: list[ShapeError],
              dropped: set[str]) -> dict:
    """The container as rules may read it: the fields in `errors` left out (names of quantities go to `dropped`)."""
    problems = _container_problems(item, pointer, rename)
    if not problems:
        return item
    for error, path in problems:
        errors.append(error)
        if len(path) == 3:
            dropped.add(str(path[2]))
    return _without(item, [path for _, path in problems])


def injected(injects: tuple, section: str, position: int, container: dict) -> list[dict]:
    """What the kind's operator adds to this container (kinds.yaml `injects`), unless the container has it already.

    An entry names its container by index in `containers` (KubeRay's Ray container is the first) or by name
    (KServe's `main`), and adds either a volume at `mountPath` (skipped when the container mounts that path) or a
    `probe` (skipped when the container sets that probe). `sizeLimit: limits.memory` is the container's memory limit,
    absent (unbounded) without one; any other sizeLimit is a quantity as written.
    """
    out = []
    for entry in injects:
        inject = dict(entry)
        target = inject.get("container")
        if section != "containers" or not (target == position if isinstance(target, int)
                                           else target == container.get("name")):
            continue
        if "mountPath" in inject:
            mounts = container.get("volumeMounts") or []
            if any(isinstance(m, dict) and m.get("mountPath") == inject["mountPath"] for m in mounts):
                continue
        if "probe" in inject and container.get(inject["probe"]) is not None:
            continue
        made = {k: v for k, v in inject.items() if k not in ("container", "sizeLimit")}
        size = inject.get("sizeLimit")
        if size == "limits.memory":  # sized to the container's memory limit, unbounded without one
            size = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if size is not None:
            made["sizeLimit"] = str(size)
        out.append(made)
    return out


def check_metadata(metadata: Any, pointer: str) -> None:
    """ShapeError unless `metadata` (when present) is a map whose labels and annotations are maps of strings.

    Tier, role, notebook and exemption are read from them: a list or a number there must be an answer naming the
    field, never a crash, and never "no labels" (which would be a silent pass for whatever they said).
    """
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise ShapeError(pointer, f"metadata must be a map, not {type(metadata).__name__}")
    for name in ("labels", "annotations"):
        value = metadata.get(name)
        if value is None:
            continue
        where = f"{pointer}/{name}"
        if not isinstance(value, dict):
            raise ShapeError(where, f"metadata.{name} must be a map of strings, not {type(value).__name__}")
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                shown = key if isinstance(key, str) else repr(key)
                raise ShapeError(f"{where}/{jp.escape(str(key))}",
                                 f"metadata.{name}[{shown}] must be a string, not {type(item).__name__}"
                                 if isinstance(key, str) else f"metadata.{name} keys must be strings, not {shown}")


def copied_metadata(obj: dict, base: str, copies: tuple, own: dict) -> dict:
    """The pod metadata an operator makes from the maps at `copies` (kinds.yaml: their labels and annotations, later
    ones winning) and the template's own: what policies read as `podMeta`. KServe's `spec.predictor.annotations`
    reach the pods, so a fraction annotation there is read as the pod's (docs/security.md, invariant a)."""
    merged: dict = {"labels": {}, "annotations": {}}
    for rel in copies + (None,):
        if rel is None:
            source, pointer = own, None
        else:
            pointer = jp.relative(base, rel)
            source = jp.resolve(obj, pointer)
            if isinstance(source, dict) and pointer not in ("", "/metadata"):  # the object's own was checked
                check_metadata({k: source.get(k) for k in ("labels", "annotations")}, pointer)
        if isinstance(source, dict):
            for name in ("labels", "annotations"):
                if isinstance(source.get(name), dict):
                    merged[name].update(source[name])
    return merged
