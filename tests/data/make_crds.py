"""Regenerate tests/data/crds.json.gz from a directory of upstream CRD files (<group>/<plural>.yaml).

    python3 tests/data/make_crds.py /path/to/crds

The tests need the CRDs' names, versions and schemas, not their prose: every `description` is left out (the API
server does not validate with it), which takes 16 MB of YAML to 150 kB compressed. Everything else of each
CustomResourceDefinition is kept as published, so the objects still install on a real API server (tests/e2e).
The output is deterministic (sorted keys, no timestamp), so regenerating from the same files gives the same bytes.
"""

import glob
import gzip
import json
import os
import sys

import yaml


def strip(value, parent_key=None):
    """`value` without `description` keys; a schema property *named* description (parent is `properties`) stays."""
    if isinstance(value, dict):
        return {key: strip(item, key) for key, item in value.items()
                if not (key == "description" and parent_key != "properties")}
    if isinstance(value, list):
        return [strip(item) for item in value]
    return value


def main(root: str) -> None:
    crds = []
    for path in sorted(glob.glob(os.path.join(root, "*", "*.yaml"))):
        with open(path, encoding="utf-8") as handle:
            for document in yaml.load_all(handle, Loader=yaml.CSafeLoader):
                if document and document.get("kind") == "CustomResourceDefinition":
                    crds.append({"source": os.path.relpath(path, root), "crd": strip(document)})
    text = json.dumps(crds, sort_keys=True, separators=(",", ":")).encode("utf-8")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crds.json.gz")
    with open(out, "wb") as handle:
        handle.write(gzip.compress(text, 9, mtime=0))
    print(f"{out}: {len(crds)} CRDs, {len(text)} bytes of JSON")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/crds")
