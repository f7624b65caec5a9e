"""CEL's `oldObject` through the real webhook server: the stored object on UPDATE, null on CREATE and in an audit.

As in a ValidatingAdmissionPolicy. It is data a rule reads, like `object`: a forged `oldObject` on a CREATE is
not seen, and a policy that judges the change cannot have its finding on the new object excused as "already
present before this update" by its verdict on the old object (which has no old object of its own).
"""

from __future__ import annotations

import textwrap

import pytest

from serverproc import make_review, start_server
from webhook.engine.core import Engine
from webhook.language.loader import load_policies
from webhook.model.resource import Resource

_HEAD = """\
apiVersion: aiadmit.dev/v1alpha1
kind: Policy
metadata:
  name: {name}
summary: A test policy over oldObject.
why: Tests need it.
remediation: None.
action: deny
match:
  kinds: [ConfigMap]
target: object
rules:
"""
OWNER = _HEAD.format(name="owner-kept") + textwrap.indent(textwrap.dedent("""\
    - name: owner-kept
      expression: oldObject == null || object.data.owner == oldObject.data.owner
      message: "owner changed from {{ oldObject.data.owner }} to {{ object.data.owner }}"
      path: /data/owner
    """), "  ")
# Without a null guard: on the old object (oldObject null) it is false, as it is on a changed new object.
FROZEN = _HEAD.format(name="frozen") + textwrap.indent(textwrap.dedent("""\
    - name: frozen
      when: has(object.metadata.labels) && "frozen" in object.metadata.labels
      expression: oldObject != null && object.data == oldObject.data
      message: frozen data changed
      path: /data
    """), "  ")


def _map(owner: str, labels: dict | None = None) -> dict:
    metadata = {"name": "cm", "namespace": "ml", **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"owner": owner}}


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    directory = tmp_path_factory.mktemp("oldobject-policies")
    (directory / "owner.yaml").write_text(OWNER)
    (directory / "frozen.yaml").write_text(FROZEN)
    return directory


@pytest.fixture(scope="module")
def server(tmp_path_factory, policies):
    with start_server(tmp_path_factory.mktemp("oldobject"), ["--no-cluster", "--policies", str(policies)]) as running:
        yield running


def _validate(server, review: dict) -> dict:
    status, body = server.review("validate", review)
    assert status == 200, body
    return body["response"]


def test_an_update_sees_the_old_object(server):
    response = _validate(server, make_review(_map("bob"), "UPDATE", old=_map("alice")))
    assert response["allowed"] is False
    assert "owner changed from alice to bob" in response["status"]["message"]
    assert _validate(server, make_review(_map("alice"), "UPDATE", old=_map("alice")))["allowed"] is True


def test_a_create_sees_null_even_when_the_review_carries_an_old_object(server):
    assert _validate(server, make_review(_map("bob")))["allowed"] is True
    assert _validate(server, make_review(_map("bob"), "CREATE", old=_map("alice")))["allowed"] is True


def test_the_old_objects_own_verdict_does_not_excuse_a_change(server):
    frozen = {"frozen": "yes"}
    changed = _validate(server, make_review(_map("bob", frozen), "UPDATE", old=_map("alice", frozen)))
    assert changed["allowed"] is False and "frozen data changed" in changed["status"]["message"]
    same = _validate(server, make_review(_map("alice", frozen), "UPDATE", old=_map("alice", frozen)))
    assert same["allowed"] is True


def test_an_audit_binds_null(policies):
    engine = Engine(load_policies([str(policies)]))
    findings = engine.evaluate(Resource(_map("bob", {"frozen": "yes"}))).findings
    # owner-kept passes (no finding) because oldObject is null; frozen's `oldObject != null` is false, not an error
    assert [(f.policy, f.result) for f in findings] == [("frozen", "fail")]
