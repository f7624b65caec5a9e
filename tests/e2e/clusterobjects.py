"""Helpers of the tests of aiadmit.dev Policy and PolicyException objects in a cluster, shared by the e2e control
plane's (test_cluster_objects_e2e.py) and the single-node cluster's (install/test_install.py), so both check the
same documents and read the status the same way."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent.parent
# CEL that does not compile (int + string): the Policy is refused in its status at the `+`'s line and column.
BROKEN_EXPRESSION = "has(object.metadata.labels) && 1 + 'a' == 2"


def team_policy(name: str, namespaces: list[str], expression: str | None = None) -> dict:
    """examples/policies/team-label.yaml named `name`, limited to `namespaces` (patterns)."""
    doc = yaml.safe_load((REPO / "examples" / "policies" / "team-label.yaml").read_text())
    doc["metadata"]["name"] = name
    doc["match"]["namespaces"] = list(namespaces)
    if expression:
        doc["rules"][0]["expression"] = expression
    return doc


def loaded_condition(obj: dict) -> dict | None:
    """The Loaded condition of a stored object, once it is for the object's current generation."""
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition["type"] == "Loaded" and condition.get("observedGeneration") == obj["metadata"]["generation"]:
            return condition
    return None


def position(condition: dict, name: str) -> tuple[int, int]:
    """(line, column) of a refused Policy's message, `Policy/<name>:<line>:<col>: ...`."""
    where = condition["message"].split(": ", 1)[0]
    assert where.startswith(f"Policy/{name}:"), condition["message"]
    line, column = (int(n) for n in where.split(":")[1:3])
    return line, column


def without_status(text: str) -> list[str]:
    """The lines of `kubectl get -o yaml` less the top-level `status` block (the positions aiadmit gives)."""
    out, inside = [], False
    for line in text.splitlines():
        if line and not line[0].isspace() and not line.startswith("- "):
            inside = line.startswith("status:")
        if not inside:
            out.append(line)
    return out


def exception(namespace: str, policy: str) -> dict:
    """A PolicyException in `namespace` letting pods named legacy-* through `policy`."""
    return {"apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyException",
            "metadata": {"name": "legacy-train", "namespace": namespace},
            "spec": {"policies": [policy], "reason": "legacy training job, labelled next sprint",
                     "requestedBy": "tenant-a", "expires": "2099-12-31",
                     "match": {"names": ["legacy-*"], "kinds": ["Pod"]}}}
