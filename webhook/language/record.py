"""The checks of the built-in bundle, done when it was built: `policies/checked.json`.

Every run checks its policies and config before it evaluates anything: each
document against its JSON Schema, each CEL expression with the reference CEL
library. For the bundle and default config that ship with aiadmit those checks
always give the same answer, yet a first run paid 0.1 s for them (importing
jsonschema and the Rust library included; bench/RESULTS.md), and so did every
webhook start and every CI job without a disk cache. The answers are therefore
recorded next to the bundle, by content:

- `passed`: [schema digest, document text digest] pairs that passed;
- `expressions`: the digest of each CEL source the default config produces,
  with the variables the reference checker found in it.

A file or expression that differs by one byte (an edited policy, a changed
param) is not in the record and is checked as always. `python3
manifests/sync.py` rewrites the record with the other generated files (or
`python3 -m webhook.language.record`); tests/test_manifests.py fails while it is
stale.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from functools import lru_cache
from typing import Optional

RECORD_NAME = "checked.json"  # in the bundle's directory (policy.BUILTIN_POLICY_DIR)


def record_path() -> str:
    from webhook.language.policy import BUILTIN_POLICY_DIR  # here, not at the top: policy loading imports this module

    return os.path.join(BUILTIN_POLICY_DIR, RECORD_NAME)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_consulted = True  # False while compute() runs every check afresh


@lru_cache(maxsize=1)
def _record() -> tuple[frozenset, dict]:
    try:
        with open(record_path(), encoding="utf-8") as handle:
            data = json.load(handle)
        return frozenset(tuple(pair) for pair in data["passed"]), dict(data["expressions"])
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset(), {}  # no record, or a broken one: everything is checked


def passed(schema_text: str, text: str) -> bool:
    """Whether this exact document text passed this exact schema when the bundle was built."""
    return _consulted and (digest(schema_text), digest(text)) in _record()[0]


def variables(source: str) -> Optional[list[str]]:
    """The variables the reference checker found in this exact CEL source when the bundle was built, or None."""
    return _record()[1].get(digest(source)) if _consulted else None


def compute() -> dict:
    """The record for the bundle and default config as they are now, every check run afresh."""
    from webhook.app import diskcache
    from webhook.language.config import CONFIG_SCHEMA_FILE, DEFAULT_CONFIG_FILE
    from webhook.engine.core import Engine
    from webhook.language.policy import BUILTIN_POLICY_DIR, POLICY_SCHEMA_FILE, policy_files

    global _consulted
    cache = diskcache.active()
    diskcache.activate(None)
    _consulted = False  # neither the record being rebuilt nor a disk cache answers: every check runs
    try:
        engine = Engine.load()  # raises if anything in the bundle or the default config is wrong
    finally:
        _consulted = True
        diskcache.activate(cache)
    passed_pairs = []
    for schema_file, paths in ((POLICY_SCHEMA_FILE, policy_files([BUILTIN_POLICY_DIR])),
                               (CONFIG_SCHEMA_FILE, [DEFAULT_CONFIG_FILE])):
        with open(schema_file, encoding="utf-8") as handle:
            schema = digest(handle.read())
        for path in paths:
            with open(path, encoding="utf-8") as handle:
                passed_pairs.append([schema, digest(handle.read())])
    expressions = {digest(e.compiled): sorted(e.variables) for policy in engine.policies for e in policy.expressions()}
    return {"passed": sorted(passed_pairs), "expressions": dict(sorted(expressions.items()))}


def text(record: dict) -> str:
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Record the checks of the built-in bundle (policies/checked.json).")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the record is stale")
    args = parser.parse_args(argv)
    wanted, path = text(compute()), record_path()
    try:
        with open(path, encoding="utf-8") as handle:
            current = handle.read()
    except OSError:
        current = ""
    if current == wanted:
        return 0
    if args.check:
        print(f"{path} is stale: run python3 -m webhook.language.record", file=sys.stderr)
        return 1
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(wanted)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
