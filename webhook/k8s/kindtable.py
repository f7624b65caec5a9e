"""kinds.yaml's pod-bearing kinds read into specs, with every relative pointer split once at load.

Each template entry says where its pod spec, metadata, replica counts and extra
containers stand relative to where the template stands (`template/spec`,
`replicas`, `../../replicas`). The walk over a resource (k8s/podtemplates.py) reads
them for every template of every review, so what does not depend on the resource
is done here once per kind: the pattern of `at` split into steps, each relative
pointer into the tokens it descends by and the pointer text it appends.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Optional

from webhook.model import pointer as jp
from webhook.k8s.kindnames import KINDS_FILE, table_data
from webhook.model.valueclass import Frozen


class Rel(Frozen):
    """A relative pointer of kinds.yaml (`template/spec`, `../replicas`, `""` for the place itself).

    `down`: its tokens when it only descends (no `..`), so it is read from the template's own node and its pointer
    is the template's plus `suffix`; None when it climbs, and is then resolved from the top as written."""

    text: str
    down: Optional[tuple[str, ...]]
    suffix: str

    def __init__(self, text: str, down: Optional[tuple[str, ...]], suffix: str) -> None:
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "down", down)
        object.__setattr__(self, "suffix", suffix)


def rel(text: str) -> Rel:
    parts = [part for part in text.split("/") if part not in ("", ".")] if text else []
    if ".." in parts:
        return Rel(text, None, "")
    down = tuple(jp.unescape(part) for part in parts)
    return Rel(text, down, jp.join("", *down))


class TemplateSpec(Frozen):
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
    # The same, read once (see the module docstring): `at` as (token, its escaped "/token") steps, the relative
    # pointers as `Rel`s (None where the entry has none).
    steps: tuple[tuple[str, str], ...] = ()
    spec_rel: Optional[Rel] = None
    metadata_rel: Optional[Rel] = None
    replicas_rel: Optional[Rel] = None
    min_replicas_rel: Optional[Rel] = None
    multiply_rels: tuple[Rel, ...] = ()
    subtract_if_rel: Optional[Rel] = None
    container_rels: tuple[Rel, ...] = ()

    def __init__(self, at: tuple[str, ...], spec: Optional[str], metadata: Optional[str], containers: tuple[str, ...],
                 rename: tuple[tuple[str, str], ...], replicas: Optional[str], multiply: tuple[str, ...], subtract: int,
                 name: str, default_replicas: int = 1, min_replicas: Optional[str] = None,
                 subtract_if: Optional[str] = None, injects: tuple[tuple[tuple[str, Any], ...], ...] = (),
                 copies: tuple[str, ...] = (), steps: tuple[tuple[str, str], ...] = (), spec_rel: Optional[Rel] = None,
                 metadata_rel: Optional[Rel] = None, replicas_rel: Optional[Rel] = None,
                 min_replicas_rel: Optional[Rel] = None, multiply_rels: tuple[Rel, ...] = (),
                 subtract_if_rel: Optional[Rel] = None, container_rels: tuple[Rel, ...] = ()) -> None:
        object.__setattr__(self, "at", at)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "metadata", metadata)
        object.__setattr__(self, "containers", containers)
        object.__setattr__(self, "rename", rename)
        object.__setattr__(self, "replicas", replicas)
        object.__setattr__(self, "multiply", multiply)
        object.__setattr__(self, "subtract", subtract)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "default_replicas", default_replicas)
        object.__setattr__(self, "min_replicas", min_replicas)
        object.__setattr__(self, "subtract_if", subtract_if)
        object.__setattr__(self, "injects", injects)
        object.__setattr__(self, "copies", copies)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "spec_rel", spec_rel)
        object.__setattr__(self, "metadata_rel", metadata_rel)
        object.__setattr__(self, "replicas_rel", replicas_rel)
        object.__setattr__(self, "min_replicas_rel", min_replicas_rel)
        object.__setattr__(self, "multiply_rels", multiply_rels)
        object.__setattr__(self, "subtract_if_rel", subtract_if_rel)
        object.__setattr__(self, "container_rels", container_rels)


class KindSpec(Frozen):
    kind: str
    group: str
    role: Optional[str]
    accelerated_role: Optional[str]
    templates: tuple[TemplateSpec, ...]

    def __init__(self, kind: str, group: str, role: Optional[str], accelerated_role: Optional[str],
                 templates: tuple[TemplateSpec, ...]) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "accelerated_role", accelerated_role)
        object.__setattr__(self, "templates", templates)


def _rel(text: Optional[str]) -> Optional[Rel]:
    return None if text is None else rel(text)


def template_spec(entry: dict) -> TemplateSpec:
    """One template entry of kinds.yaml (or one found by shape, k8s/shape.py) with its pointers read."""
    at = tuple(jp.split(entry.get("at", "")))
    spec = entry.get("spec", "template/spec")
    metadata = entry.get("metadata", "template/metadata")
    containers = tuple(entry.get("containers", ()))
    replicas = entry.get("replicas")
    multiply = tuple(entry.get("multiply", ()))
    min_replicas = entry.get("minReplicas")
    subtract_if = entry.get("subtractIf")
    return TemplateSpec(
        at=at,
        spec=spec,
        metadata=metadata,
        containers=containers,
        rename=tuple(sorted((entry.get("rename") or {}).items())),
        replicas=replicas,
        multiply=multiply,
        subtract=int(entry.get("subtract", 0)),
        name=entry.get("name", "template"),
        default_replicas=int(entry.get("defaultReplicas", 1)),
        min_replicas=min_replicas,
        subtract_if=subtract_if,
        injects=tuple(tuple(sorted(item.items())) for item in entry.get("injects", ())),
        copies=tuple(entry.get("copies", ())),
        steps=tuple((token, "/" + jp.escape(token)) for token in at),
        spec_rel=_rel(spec),
        metadata_rel=_rel(metadata),
        replicas_rel=_rel(replicas),
        min_replicas_rel=_rel(min_replicas),
        multiply_rels=tuple(rel(factor) for factor in multiply),
        subtract_if_rel=_rel(subtract_if),
        container_rels=tuple(rel(extra) for extra in containers),
    )


_VOUCHED: dict[str, dict] = {}  # the built-in table, as a kept bundle carried it (`vouch`)


@lru_cache(maxsize=None)
def kind_table(path: str = KINDS_FILE) -> dict[tuple[str, str], KindSpec]:
    found = _VOUCHED.get(path)
    if found is not None:
        return found
    data = table_data(path)
    table = {}
    for entry in data["kinds"]:
        spec = KindSpec(
            kind=entry["kind"],
            group=entry.get("group", ""),
            role=entry.get("role"),
            accelerated_role=entry.get("acceleratedRole"),
            templates=tuple(template_spec(t) for t in entry.get("templates", ())),
        )
        table[(spec.group, spec.kind)] = spec
    return table


def vouch(table: dict[tuple[str, str], KindSpec]) -> None:
    """Take `table` as the built-in `kind_table()` for this process, if it is not built yet: the table a loaded
    bundle kept whole carries (language/bundlecache.py), under a key that holds kinds.yaml's, kinds.json's and this
    module's size and modification time, so building it again would give the same specs (13 M instructions of a
    warm one-file audit, bench/RESULTS.md, h-boot). Every spec is frozen, as a built one is."""
    _VOUCHED.setdefault(KINDS_FILE, table)
