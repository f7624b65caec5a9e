"""Regenerate tests/data/crds.json.gz from the upstream CRD files that tests/data/crds-SOURCES.tsv names.

    python3 tests/data/make_crds.py [GIT_DIR]

Each row of crds-SOURCES.tsv says where one CRD file comes from and its sha256:
- `go`: a file inside a Go module's zip as the Go module proxy serves it (`go mod download -json MODULE@VERSION`,
  which puts the module under GOMODCACHE; GOFLAGS=-mod=mod). The zip holds the repository's files at the release
  tag, so the CRD is the release's own, fetched by an ordinary client from a package registry.
- `git`: a release whose module the proxy does not serve; the file is read from GIT_DIR/<file> (a directory of
  upstream files laid out as <group>/<plural>.yaml, by default ../shared/crds beside the checkout), a copy of the git
  blob at the commit the row names.
A file whose sha256 differs from the row's is an error: the output is the release's CRD or nothing.

The tests need the CRDs' names, versions and schemas, not their prose: every `description` is left out (the API
server does not validate with it), which takes tens of MB of YAML to a few hundred kB compressed. Everything else of
each CustomResourceDefinition is kept as published, so the objects still install on a real API server (tests/e2e).
The output is deterministic (sorted keys, no timestamp), so regenerating from the same files gives the same bytes.
"""

import csv
import gzip
import hashlib
import json
import os
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = os.path.join(HERE, "crds-SOURCES.tsv")


def strip(value, parent_key=None):
    """`value` without `description` keys; a schema property *named* description (parent is `properties`) stays."""
    if isinstance(value, dict):
        return {key: strip(item, key) for key, item in value.items()
                if not (key == "description" and parent_key != "properties")}
    if isinstance(value, list):
        return [strip(item) for item in value]
    return value


def rows() -> list[dict]:
    with open(SOURCES, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def module_dir(module: str, version: str, cache: dict) -> str:
    """The directory of MODULE@VERSION, downloaded through the Go module proxy when not yet in the module cache."""
    key = f"{module}@{version}"
    if key not in cache:
        env = dict(os.environ, GOFLAGS="-mod=mod")
        out = subprocess.run(["go", "mod", "download", "-json", key], capture_output=True, text=True, env=env,
                             timeout=600)
        info = json.loads(out.stdout or "{}")
        if out.returncode != 0 or info.get("Error") or not info.get("Dir"):
            sys.exit(f"{key}: {info.get('Error') or out.stderr.strip()}")
        cache[key] = info["Dir"]
    return cache[key]


def source_file(row: dict, git_dir: str, cache: dict) -> str:
    if row["source"] == "go":
        return os.path.join(module_dir(row["origin"], row["version"], cache), row["path"])
    if row["source"] == "git":
        return os.path.join(git_dir, row["file"])
    sys.exit(f"{SOURCES}: {row['file']}: source must be go or git, not {row['source']!r}")


def main(git_dir: str) -> None:
    crds, cache = [], {}
    for row in rows():
        path = source_file(row, git_dir, cache)
        with open(path, "rb") as handle:
            data = handle.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest != row["sha256"]:
            sys.exit(f"{path}: sha256 {digest}, but {SOURCES} names {row['sha256']} for {row['file']}")
        for document in yaml.load_all(data, Loader=yaml.CSafeLoader):
            if document and document.get("kind") == "CustomResourceDefinition":
                crds.append({"source": row["file"], "crd": strip(document)})
    text = json.dumps(crds, sort_keys=True, separators=(",", ":")).encode("utf-8")
    out = os.path.join(HERE, "crds.json.gz")
    with open(out, "wb") as handle:
        handle.write(gzip.compress(text, 9, mtime=0))
    print(f"{out}: {len(crds)} CRDs, {len(text)} bytes of JSON")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("AIADMIT_SHARED") or os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "shared"), "crds"))
