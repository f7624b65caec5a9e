"""Writing the built-in bundle's record of checks (`policies/checked.json`, read by language/record.py).

The record is computed by loading the bundle and the default config with every
check run afresh (`checks.NONE`: neither the record being rebuilt nor any cache
answers), so it needs the whole engine: that is why writing it lives here, at
the top, and reading it at the bottom of the language layer.
`python3 manifests/sync.py` calls it with the other generated files.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from webhook.engine.core import Engine
from webhook.language import checks
from webhook.language.bundle import (BUILTIN_POLICY_DIR, CONFIG_SCHEMA_FILE, DEFAULT_CONFIG_FILE,
                                     POLICY_SCHEMA_FILE, RECORD_FILE)
from webhook.language.config import load_config
from webhook.language.loader import load_policies, policy_files
from webhook.language.record import digest


def compute() -> dict:
    """The record for the bundle and default config as they are now, every check run afresh."""
    config = load_config(checks=checks.NONE)  # raises if anything in the default config is wrong
    fresh = checks.Checks(use_record=False, note=True)  # every check runs; the CEL checks' answers are noted
    engine = Engine(load_policies([BUILTIN_POLICY_DIR], config.params(), fresh, config.cel_limits), config)
    passed_pairs = []
    for schema_file, paths in ((POLICY_SCHEMA_FILE, policy_files([BUILTIN_POLICY_DIR])),
                               (CONFIG_SCHEMA_FILE, [DEFAULT_CONFIG_FILE])):
        with open(schema_file, encoding="utf-8") as handle:
            schema = digest(handle.read())
        for path in paths:
            with open(path, encoding="utf-8") as handle:
                passed_pairs.append([schema, digest(handle.read())])
    assert engine.policies and fresh.noted  # every CEL expression was checked by aiadmit's checker as it loaded
    return {"passed": sorted(passed_pairs), "cel": fresh.noted}


def text(record: dict) -> str:
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="Record the checks of the built-in bundle (policies/checked.json).")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the record is stale")
    args = parser.parse_args(argv)
    wanted = text(compute())
    try:
        with open(RECORD_FILE, encoding="utf-8") as handle:
            current = handle.read()
    except OSError:
        current = ""
    if current == wanted:
        return 0
    if args.check:
        print(f"{RECORD_FILE} is stale: run python3 manifests/sync.py", file=sys.stderr)
        return 1
    with open(RECORD_FILE, "w", encoding="utf-8") as handle:
        handle.write(wanted)
    print(f"wrote {RECORD_FILE}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
