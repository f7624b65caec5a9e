"""Where the built-in bundle and the language's schemas live: the leaf of the language layer.

The bundle is `policies/` at the repository root in a checkout; a wheel (pip
install ., pre-commit) carries it as `webhook/policies`, where this module looks
when the checkout's copy is not there.
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(_HERE)

BUILTIN_POLICY_DIR = os.path.join(os.path.dirname(_PACKAGE), "policies")
if not os.path.isfile(os.path.join(BUILTIN_POLICY_DIR, "policy.schema.json")):  # installed from a wheel
    BUILTIN_POLICY_DIR = os.path.join(_PACKAGE, "policies")
POLICY_SCHEMA_FILE = os.path.join(BUILTIN_POLICY_DIR, "policy.schema.json")
RECORD_FILE = os.path.join(BUILTIN_POLICY_DIR, "checked.json")  # the bundle's recorded checks (language/record.py)
DEFAULT_CONFIG_FILE = os.path.join(_HERE, "default-config.yaml")
CONFIG_SCHEMA_FILE = os.path.join(_HERE, "config.schema.json")
