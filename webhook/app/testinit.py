"""`aiadmit test --init POLICY`: a starting PolicyTest for a new policy, with a resource it fails and one it passes.

The cases are not guessed: the resources are evaluated with the policy and the file says what the policy did.
The failing resource is a small GPU workload of a kind the policy matches; the passing one is what the policy's
own mutations make of it when they fix it. When neither gives the wanted outcome (a policy without mutations, a
kind aiadmit cannot build a sample of), the resource is written with the outcome the author must reach and a
comment saying so: `aiadmit test` then fails on that case until the author edits the resource, so the scaffold
never passes by itself.
"""

from __future__ import annotations

import copy
import os

import yaml

from webhook.app.policytest import outcome
from webhook.engine.core import Engine
from webhook.model.resource import Origin, Resource

_CONTAINER = {"name": "server", "image": "registry.example/model-server:1.0",
              "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "16Gi"},
                            "requests": {"nvidia.com/gpu": 1, "memory": "16Gi", "cpu": "4"}}}


def _sample(kind: str, name: str) -> dict | None:
    """A GPU workload of `kind` (the kinds whose shape everyone knows), or None."""
    pod_spec = {"containers": [copy.deepcopy(_CONTAINER)]}
    labels = {"app": name}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"}, "spec": pod_spec}
    template = {"metadata": {"labels": labels}, "spec": pod_spec}
    if kind in ("Deployment", "StatefulSet"):
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "ml"},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}}
    if kind == "Job":
        template["spec"]["restartPolicy"] = "Never"
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "ml"},
                "spec": {"template": template}}
    return None


def _kind(policy) -> str:
    for kind in ("Pod", "Deployment", "Job", "StatefulSet"):
        if policy.match.admits_kind(kind):
            return kind
    return sorted(policy.match.kinds)[0] if policy.match.kinds else "Pod"


def _evaluate(engine: Engine, obj: dict, policy_id: str) -> tuple[str, list]:
    return outcome(engine.evaluate(Resource(obj, Origin(file="<init>"))), policy_id)


class InitError(ValueError):
    """What keeps --init from writing: the file it is about and why (printed as a diagnostic)."""

    def __init__(self, file: str, message: str):
        super().__init__(f"{file}: {message}")
        self.file, self.message = file, message


def scaffold(policy_file: str, directory: str) -> tuple[list[str], list[tuple[str, int, str]]]:
    """Write DIR/test.yaml and DIR/resources.yaml; (the files written, notes for the author: each with the file
    and line of its `# TODO` comment in test.yaml). InitError when it cannot."""
    engine = Engine.load([policy_file])
    if len(engine.policies) != 1:
        raise InitError(policy_file, f"--init takes one policy file ({len(engine.policies)} policies found)")
    policy = engine.policies[0]
    kind = _kind(policy)
    failing = _sample(kind, f"{policy.id}-fails")
    notes = []
    if failing is None:
        failing = {"apiVersion": "FILL-IN", "kind": kind, "metadata": {"name": f"{policy.id}-fails"}, "spec": {}}
        notes.append(f"aiadmit has no sample of kind {kind}: fill in both resources")
    got, findings = _evaluate(engine, failing, policy.id)
    passing = copy.deepcopy(failing)
    passing["metadata"]["name"] = f"{policy.id}-passes"
    mutation = engine.mutate(Resource(passing, Origin(file="<init>")))
    if mutation.operations and mutation.patched is not None:
        passing = mutation.patched
    passed, _ = _evaluate(engine, passing, policy.id)
    fail_case = {"resource": {"kind": kind, "name": failing["metadata"]["name"]}, "policy": policy.id,
                 "expect": "fail"}
    if got == "fail":
        fail_case["rules"] = sorted({f.rule for f in findings if f.result == "fail"})
    else:
        notes.append(f"{failing['metadata']['name']}: the policy says {got}: edit it until the policy fails it")
    if passed != "pass":
        notes.append(f"{passing['metadata']['name']}: the policy says {passed}: edit it until the policy passes it")
    pass_case = {"resource": {"kind": kind, "name": passing["metadata"]["name"]}, "policy": policy.id,
                 "expect": "pass"}
    if policy.mutations:
        pass_case["patch"] = []
    test = {"apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyTest", "metadata": {"name": policy.id},
            "policies": [os.path.relpath(policy_file, directory)], "resources": ["resources.yaml"],
            "cases": [fail_case, pass_case]}
    os.makedirs(directory, exist_ok=True)
    test_path, resources_path = os.path.join(directory, "test.yaml"), os.path.join(directory, "resources.yaml")
    for path in (test_path, resources_path):
        if os.path.exists(path):
            raise InitError(path, "exists; --init does not overwrite")
    header = "# Written by `aiadmit test --init`" + "".join(f"\n# TODO {note}" for note in notes) + "\n"
    with open(test_path, "w", encoding="utf-8") as handle:
        handle.write(header + yaml.safe_dump(test, sort_keys=False, default_flow_style=None, width=110))
    with open(resources_path, "w", encoding="utf-8") as handle:
        handle.write(header + yaml.safe_dump_all([failing, passing], sort_keys=False, width=110))
    # the header's TODO lines: the first is line 2 of test.yaml
    return [test_path, resources_path], [(test_path, line, note) for line, note in enumerate(notes, 2)]
