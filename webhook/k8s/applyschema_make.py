"""Writes webhook/k8s/applyschema.json: what server-side apply's merge needs of the built-in kinds' OpenAPI schema.

Run `python3 -m webhook.k8s.applyschema_make [OPENAPI_V3_DIR]` (default: the v1.37.2 spec in the Go module cache,
~/go/pkg/mod/k8s.io/kubernetes@v1.37.2/api/openapi-spec/v3). Kept per type: its fields and each field's shape, a
list's `x-kubernetes-list-type` (`atomic` when unset, as structured-merge-diff reads a list without one, unless a
`x-kubernetes-patch-strategy: merge` with a merge key makes it a map by that key), its map keys, and a map's or
struct's `x-kubernetes-map-type`. Shapes: 0 a scalar, "Type" a struct, ["list", type, keys, item], ["map", type,
value] (additionalProperties). tests/test_mapoffline.py checks that the file is what this writes, when the spec
is present.
"""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.expanduser("~/go/pkg/mod/k8s.io/kubernetes@v1.37.2/api/openapi-spec/v3")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "applyschema.json")
FILES = ("api__v1_openapi.json", "apis__apps__v1_openapi.json", "apis__batch__v1_openapi.json",
         "apis__networking.k8s.io__v1_openapi.json", "apis__policy__v1_openapi.json")
_PREFIX = "#/components/schemas/"


def _short(name: str) -> str:
    return name.replace("io.k8s.api.", "").replace("io.k8s.apimachinery.pkg.apis.meta.", "meta.") \
        .replace("io.k8s.apimachinery.pkg.", "")


def _shape(schema: dict, wanted: list, schemas: dict) -> object:
    if "allOf" in schema and len(schema["allOf"]) == 1:
        schema = dict(schema, **schema["allOf"][0])
    if "$ref" in schema:
        name = schema["$ref"][len(_PREFIX):]
        if not (schemas.get(name) or {}).get("properties"):  # Time, Quantity, IntOrString: scalars
            return 0
        wanted.append(name)
        return _short(name)
    if schema.get("type") == "array":
        kind = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or []
        if kind is None and schema.get("x-kubernetes-patch-strategy", "").startswith("merge") \
                and schema.get("x-kubernetes-patch-merge-key"):
            kind, keys = "map", [schema["x-kubernetes-patch-merge-key"]]
        return ["list", kind or "atomic", keys, _shape(schema.get("items") or {}, wanted, schemas)]
    if schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict):
        return ["map", schema.get("x-kubernetes-map-type", "granular"),
                _shape(schema["additionalProperties"], wanted, schemas)]
    return 0


def build(root: str = ROOT) -> dict:
    schemas: dict = {}
    for name in FILES:
        with open(os.path.join(root, name), encoding="utf-8") as handle:
            schemas.update(json.load(handle)["components"]["schemas"])
    kinds, types = {}, {}
    wanted = []
    for name, schema in schemas.items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if "spec" in (schema.get("properties") or {}) or "data" in (schema.get("properties") or {}):
                api = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
                kinds[f"{api}/{gvk['kind']}"] = _short(name)
                wanted.append(name)
    while wanted:
        name = wanted.pop()
        if _short(name) in types or name not in schemas:
            continue
        schema = schemas[name]
        fields = {field: _shape(value, wanted, schemas) for field, value in sorted((schema.get("properties") or {}).items())}
        entry = {"fields": fields}
        if schema.get("x-kubernetes-map-type") == "atomic":
            entry["atomic"] = True
        types[_short(name)] = entry
    return {"source": "kubernetes v1.37.2 api/openapi-spec/v3", "kinds": dict(sorted(kinds.items())),
            "types": dict(sorted(types.items()))}


def main(argv: list) -> int:
    data = build(argv[1] if len(argv) > 1 else ROOT)
    with open(OUT, "w", encoding="utf-8") as handle:
        json.dump(data, handle, separators=(",", ":"), sort_keys=False)
        handle.write("\n")
    print(f"{OUT}: {len(data['kinds'])} kinds, {len(data['types'])} types")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
