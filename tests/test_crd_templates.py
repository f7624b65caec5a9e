"""Every place a pod can stand in the AI operators' CRDs is known to the kinds table, or ignored with a reason.

The CRDs are the releases in tests/data/crds.json.gz (module, version and licence per file in
tests/data/crds-SOURCES.tsv). Each served version's openAPIV3Schema is walked for every subschema shaped like a
PodSpec (a `containers` list of container schemas) or like a single container outside one (KServe's `model`,
TrainJob's `trainer`); every such location must be a template or extra container of the kind's entry in
webhook/k8s/kinds.yaml, or be listed under `ignoredTemplates` there with the reason aiadmit does not judge it.
So a release that adds a pod template (a new role, a new replica group, a new kind) fails here until the table
says what to do with it, and the other way round: every location the table names must exist in the CRD, so a
field the operator renamed or dropped does not leave a template that matches nothing.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os

import pytest

from testdata import DATA, crds
from webhook.k8s.kindnames import KINDS_FILE, table_data

SOURCES = os.path.join(DATA, "crds-SOURCES.tsv")


def _container_schema(schema: dict) -> bool:
    """A Kubernetes container's schema: an image, a command line and an environment."""
    props = schema.get("properties") or {}
    return "image" in props and "env" in props and ("command" in props or "args" in props)


def _pod_spec_schema(schema: dict) -> bool:
    """A pod spec's schema, or a patch of one (TrainJob's runtimePatches keep only some container fields): a
    `containers` list of named maps, as webhook/k8s/shape.py finds pod specs in objects."""
    containers = (schema.get("properties") or {}).get("containers") or {}
    return containers.get("type") == "array" and "name" in ((containers.get("items") or {}).get("properties") or {})


POD_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def locations(schema: dict, at: str = "") -> list[tuple[str, str]]:
    """(pointer, "podSpec" | "container") of every pod spec and lone container schema under `schema`, "*" for a
    list item or a map value. A pod spec's own container lists are its own; its other fields are searched (KServe
    inlines a worker's pod spec in the predictor's)."""
    pod_spec = _pod_spec_schema(schema)
    found = [(at, "podSpec")] if pod_spec else [(at, "container")] if at and _container_schema(schema) else []
    for key, sub in (schema.get("properties") or {}).items():
        if (at == "" and key in ("metadata", "status")) or (pod_spec and key in POD_CONTAINER_LISTS):
            continue
        found += locations(sub, f"{at}/{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += locations(schema[key], f"{at}/*")
    return found


def _join(at: str, relative: str) -> str:
    return at if relative == "" else f"{at.rstrip('/')}/{relative}"


def table_locations(entry: dict) -> set[tuple[str, str]]:
    """What the kinds table knows of one kind: its pod specs and its extra containers, as pointers."""
    known = set()
    for template in entry.get("templates", ()):
        at = template.get("at", "")
        spec = template.get("spec", "template/spec")
        if spec is not None:
            known.add((_join(at, spec), "podSpec"))
        for name in template.get("containers", ()):
            known.add((_join(at, name), "container"))
    return known


def _table():
    data = table_data(KINDS_FILE)
    kinds = {(e.get("group", ""), e["kind"]): e for e in data["kinds"]}
    other = {(group, kind) for group, entry in (data.get("otherKinds") or {}).items() for kind in entry["kinds"]}
    ignored = {}
    for item in data.get("ignoredTemplates") or ():
        for at in item["at"]:
            ignored[(item["group"], item["kind"], at)] = item["why"]
    return kinds, other, ignored


def _crd_cases():
    cases = []
    for crd in crds():
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served"):
                cases.append(pytest.param(spec["group"], spec["names"]["kind"], version,
                                          id=f'{spec["names"]["kind"]}.{spec["group"]}/{version["name"]}'))
    return cases


@pytest.mark.parametrize("group, kind, version", _crd_cases())
def test_every_pod_location_is_known_or_ignored(group, kind, version):
    kinds, other, ignored = _table()
    found = locations(version["schema"]["openAPIV3Schema"])
    if (group, kind) not in kinds and (group, kind) not in other:
        pytest.fail(f"{kind}.{group} is in no section of kinds.yaml: list it under kinds (it holds pods) or "
                    f"otherKinds (it holds none)")
    known = table_locations(kinds[(group, kind)]) if (group, kind) in kinds else set()
    unknown = [f"{at} ({shape})" for at, shape in found
               if (at, shape) not in known and (group, kind, at) not in ignored]
    assert not unknown, (f"{kind}.{group} {version['name']}: pod locations the kinds table neither reads nor "
                         f"ignores: {unknown}")
    if (group, kind) in other:
        return
    stale = sorted(f"{at} ({shape})" for at, shape in known - set(found))
    assert not stale, f"{kind}.{group} {version['name']}: the kinds table reads locations the CRD does not have: {stale}"


def test_ignored_locations_exist_and_say_why():
    """An ignored location names a place the CRD has (so a rename is noticed) and a reason of its own."""
    _, _, ignored = _table()
    schemas = {}
    for crd in crds():
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served"):
                schemas.setdefault((spec["group"], spec["names"]["kind"]), set()).update(
                    at for at, _ in locations(version["schema"]["openAPIV3Schema"]))
    for (group, kind, at), why in ignored.items():
        assert len(why.split()) >= 8, f"{kind}.{group} {at}: say why it is ignored"
        if (group, kind) in schemas:
            assert at in schemas[(group, kind)], f"{kind}.{group}: ignored location {at} is not in its CRD"


def test_the_walk_finds_what_the_table_reads():
    """The walk itself: known locations of three kinds, found by shape alone."""
    schemas = {(c["spec"]["names"]["kind"], v["name"]): v["schema"]["openAPIV3Schema"]
               for c in crds() for v in c["spec"]["versions"]}
    assert ("/spec/pytorchReplicaSpecs/*/template/spec", "podSpec") in locations(schemas[("PyTorchJob", "v1")])
    isvc = locations(schemas[("InferenceService", "v1beta1")])
    assert ("/spec/predictor", "podSpec") in isvc and ("/spec/predictor/model", "container") in isvc
    assert ("/spec/trainer", "container") in locations(schemas[("TrainJob", "v1alpha1")])


def test_sources_name_every_crd_with_its_digest_and_licence():
    """crds-SOURCES.tsv describes crds.json.gz exactly: one row per CRD, with kind, scope, served versions, a
    sha256 of the upstream file, a licence and where it came from (a Go module version, or a git commit)."""
    with open(SOURCES, encoding="utf-8", newline="") as handle:
        rows = {row["file"]: row for row in csv.DictReader(handle, delimiter="\t")}
    with gzip.open(os.path.join(DATA, "crds.json.gz"), "rt", encoding="utf-8") as handle:
        entries = json.load(handle)
    assert sorted(rows) == sorted(e["source"] for e in entries)
    for entry in entries:
        row, spec = rows[entry["source"]], entry["crd"]["spec"]
        assert row["kind"] == spec["names"]["kind"] and row["scope"] == spec["scope"], entry["source"]
        served = [v["name"] for v in spec["versions"] if v.get("served")]
        assert [v.split("(")[0] for v in row["versions_served"].split(",")] == served, entry["source"]
        assert row["source"] in ("go", "git") and row["origin"] and row["version"] and row["path"], entry["source"]
        assert row["license"] == "Apache-2.0" and len(row["sha256"]) == 64, entry["source"]
        int(row["size_bytes"])
    assert hashlib.sha256(b"").hexdigest() not in {r["sha256"] for r in rows.values()}


def test_kueue_is_read_at_v1beta2():
    """Kueue serves only v1beta2 since v0.20 (v1beta1 unserved; v1beta2 served since v0.15 and the storage version
    since v0.16): the live LocalQueue cache must ask for v1beta2, or every queue would look absent."""
    from webhook.inputs.livefacts import KUEUE_VERSIONS

    assert KUEUE_VERSIONS[0] == "v1beta2"
    served = {v["name"] for c in crds() if c["spec"]["names"]["kind"] == "LocalQueue"
              for v in c["spec"]["versions"] if v.get("served")}
    assert "v1beta2" in served
