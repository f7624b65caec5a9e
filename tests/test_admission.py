"""webhook/app/admission.py: reviews in, responses out, with the real engine and the built-in policies."""

import base64
import copy
import json
import textwrap

import jsonpatch
import pytest

from objects import IMAGE, OWNER, POLICY_FILES, RS_CONTROLLER, deployment, gpu_pod
from serverproc import make_review
from webhook.app import admission
from webhook.inputs import review as reviews
from webhook.outputs import response as responses
from webhook.language.config import load_config
from webhook.engine.core import Engine
from webhook.model.facts import OfflineFacts
from webhook.language.loader import load_policies
from webhook.model.findings import Finding
from webhook.model.resource import Origin, Resource

def engine_with(tmp_path=None, config_text=None):
    path = None
    if config_text is not None:
        path = tmp_path / "config.yaml"
        path.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\n" + textwrap.dedent(config_text))
    config = load_config(str(path) if path else None)
    return Engine(load_policies(POLICY_FILES, config.params()), config)


@pytest.fixture(scope="module")
def engine():
    return engine_with()


def request_of(review):
    return reviews.parse(json.dumps(review).encode())


def policies_denied(outcome):
    return outcome.denied_policies


# ---------------------------------------------------------------------- parse
@pytest.mark.parametrize("body, reason", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "got a JSON list"),
    (b"{}", "expected kind AdmissionReview"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "no request"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}}',
     "request.uid"),
    (b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}}',
     "admissionReviewVersions: [v1]"),
    (b"[" * 20000 + b"]" * 20000, "nests too deeply"),
    (b"\xff\xfe", "not valid JSON"),
])
def test_parse_refuses_what_is_not_a_v1_review(body, reason):
    with pytest.raises(reviews.ReviewError) as caught:
        reviews.parse(body)
    assert reason in caught.value.reason and caught.value.status == 400


# ---------------------------------------------------------------------- validate
def test_deny_lists_every_failed_finding_with_403(engine):
    """Every distinct failed finding is a line (they used to hide behind "(+1 more)")."""
    review = json.load(open("examples/pytorchjob-gpu.json"))
    outcome = admission.validate(engine, request_of(review))
    response = outcome.response
    assert response["uid"] == review["request"]["uid"] and response["allowed"] is False
    assert response["status"]["code"] == 403
    lines = response["status"]["message"].splitlines()
    assert lines[0].startswith("aiadmit denied PyTorchJob team-a/pytorch-simple")
    ids = [line.split(":", 1)[0] for line in lines[1:]]
    assert sorted(set(ids)) == outcome.denied_policies
    assert {"shm-sized", "resources-declared"} <= set(ids) and ids.count("resources-declared") >= 2
    assert len(lines[1:]) == len(set(lines[1:])) and not any("more)" in line for line in lines)
    assert all(len(line) <= responses.DENY_LINE_RUNES for line in lines[1:])


def test_deny_message_stays_within_its_budget_then_counts():
    resource = Resource(gpu_pod(), Origin())
    blocking = [Finding(policy=f"policy-{i % 7}", rule="r", action="deny", result="fail",
                        message=f"finding {i} " + "x" * 300, resource=resource) for i in range(200)]
    message = responses.deny_message(resource, blocking)
    assert len(message) <= responses.DENY_MESSAGE_RUNES
    lines = message.splitlines()
    shown = len(lines) - 2
    assert lines[-1].startswith(f"… {200 - shown} more finding(s) not shown (") and "aiadmit audit" in lines[-1]
    assert all(len(line) <= responses.DENY_LINE_RUNES for line in lines)
    few = responses.deny_message(resource, blocking[:5])
    assert len(few.splitlines()) == 6 and "not shown" not in few


def test_compliant_object_is_allowed_without_warnings(engine):
    outcome = admission.validate(engine, request_of(make_review(gpu_pod())))
    assert outcome.response == {"uid": outcome.uid, "allowed": True}
    assert outcome.outcome == "allowed"


def test_warn_action_becomes_a_warning(tmp_path):
    engine = engine_with(tmp_path, "policies:\n  shm-sized: {action: warn}\n")
    outcome = admission.validate(engine, request_of(make_review(gpu_pod(shm=False))))
    assert outcome.response["allowed"] is True and outcome.outcome == "warned"
    assert any(w.startswith("shm-sized: ") for w in outcome.response["warnings"])


def test_warnings_respect_the_api_server_limits():
    texts = [f"policy-{i}: line one\nline\ttwo " + "x" * 400 for i in range(60)] + ["dup", "dup"]
    fitted = responses.fit_warnings(texts)
    assert all(len(w) <= responses.WARNING_RUNES for w in fitted)
    assert sum(map(len, fitted)) <= responses.WARNINGS_TOTAL_RUNES
    assert not any(c in w for w in fitted for c in "\n\t\r")
    assert fitted[-1].startswith("aiadmit: ") and "more warning(s) not shown" in fitted[-1]
    shown = len(fitted) - 1
    assert fitted[-1] == f"aiadmit: {61 - shown} more warning(s) not shown"
    assert responses.fit_warnings(["a", "a", "b"]) == ["a", "b"]


@pytest.mark.parametrize("operation, sub", [("DELETE", None), ("CONNECT", None), ("UPDATE", "status"),
                                            ("UPDATE", "scale"), ("CREATE", "eviction")])
def test_delete_connect_and_subresources_are_admitted_at_once(engine, operation, sub):
    review = make_review(gpu_pod(shm=False), operation=operation, old=gpu_pod(shm=False), sub_resource=sub)
    for run in (admission.validate, admission.mutate):
        outcome = run(engine, request_of(review))
        assert outcome.response == {"uid": review["request"]["uid"], "allowed": True}
        assert outcome.outcome == "skipped"


def test_update_demotes_pre_existing_violations_to_warnings(engine):
    old = gpu_pod(shm=False)
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "vision"}
    outcome = admission.validate(engine, request_of(make_review(new, "UPDATE", old)))
    assert outcome.response["allowed"] is True
    assert any("already present before this update" in w and w.startswith("shm-sized")
               for w in outcome.response["warnings"])


def test_update_denies_only_new_violations(engine):
    old = gpu_pod(shm=True)
    new = copy.deepcopy(old)
    del new["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"]  # new violation
    old["metadata"]["annotations"] = {"note": "x"}
    outcome = admission.validate(engine, request_of(make_review(new, "UPDATE", old)))
    assert outcome.response["allowed"] is False
    assert outcome.denied_policies == ["resources-declared"]


def test_update_without_old_object_is_checked_like_a_create(engine):
    outcome = admission.validate(engine, request_of(make_review(gpu_pod(shm=False), "UPDATE", None)))
    assert outcome.response["allowed"] is False and "shm-sized" in outcome.denied_policies


def test_trusted_controller_creating_an_owned_pod_gets_warnings(engine):
    pod = gpu_pod(shm=False, owner=OWNER)
    outcome = admission.validate(engine, request_of(make_review(pod, username=RS_CONTROLLER)))
    assert outcome.response["allowed"] is True
    assert any("owner admitted by its controller" in w for w in outcome.response["warnings"])


def test_a_forged_owner_reference_does_not_help_a_user(engine):
    pod = gpu_pod(shm=False, owner=OWNER)
    outcome = admission.validate(engine, request_of(make_review(pod, username="mallory@example.com")))
    assert outcome.response["allowed"] is False and "shm-sized" in outcome.denied_policies


def test_trusted_controller_without_controller_owner_is_checked(engine):
    owner = {**OWNER, "controller": False}
    for pod in (gpu_pod(shm=False), gpu_pod(shm=False, owner=owner)):
        outcome = admission.validate(engine, request_of(make_review(pod, username=RS_CONTROLLER)))
        assert outcome.response["allowed"] is False


def test_trusted_controllers_come_from_config(tmp_path):
    engine = engine_with(tmp_path, "trustedControllers: ['system:serviceaccount:ops:*-operator']\n")
    pod = gpu_pod(shm=False, owner=OWNER)
    allowed = admission.validate(engine, request_of(make_review(pod, username="system:serviceaccount:ops:x-operator")))
    denied = admission.validate(engine, request_of(make_review(pod, username="system:serviceaccount:dev:x-operator")))
    assert allowed.response["allowed"] is True and denied.response["allowed"] is False
    # the defaults are kept (lists extend the built-in config)
    assert RS_CONTROLLER in engine.config.trusted_controllers


def test_dry_run_gets_the_same_answer(engine):
    review = make_review(gpu_pod(shm=False), uid="same-uid")
    dry = make_review(gpu_pod(shm=False), uid="same-uid", dry_run=True)
    for run in (admission.validate, admission.mutate):
        wet_outcome, dry_outcome = run(engine, request_of(review)), run(engine, request_of(dry))
        assert wet_outcome.response == dry_outcome.response
        assert dry_outcome.dry_run is True


def test_exception_from_config_admits_and_an_expired_one_is_reported(tmp_path):
    engine = engine_with(tmp_path, """
        exceptions:
          - {name: shm-legacy, policies: [shm-sized], namespaces: [ml], names: [legacy-*], reason: migrating}
          - {name: old, policies: [shm-sized], namespaces: [ml], names: [train], reason: gone,
             expires: "2020-01-01"}
    """)
    legacy = admission.validate(engine, request_of(make_review(gpu_pod("legacy-1", shm=False))))
    assert legacy.response["allowed"] is True
    expired = admission.validate(engine, request_of(make_review(gpu_pod("train", shm=False))))
    assert expired.response["allowed"] is False
    assert any("expired" in w for w in expired.response["warnings"])


def namespace(name, labels):
    return Resource({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


@pytest.mark.parametrize("level, allowed, warned", [("warn", True, True), ("audit", True, False),
                                                    ("deny", False, False)])
def test_namespace_enforcement_label_lowers_actions(engine, level, allowed, warned):
    facts = OfflineFacts([namespace("ml", {"aiadmit.dev/enforcement": level})])
    outcome = admission.validate(engine, request_of(make_review(gpu_pod(shm=False))), facts)
    assert outcome.response["allowed"] is allowed
    assert bool(outcome.response.get("warnings")) is warned


def test_annotation_exemption_only_where_config_allows(tmp_path):
    pod = gpu_pod(shm=False)
    pod["metadata"]["annotations"] = {"aiadmit.dev/exempt": "shm-sized"}
    strict = admission.validate(engine_with(), request_of(make_review(pod)))
    assert strict.response["allowed"] is False
    lenient = engine_with(tmp_path, "annotationExemptable: [shm-sized]\n")
    assert admission.validate(lenient, request_of(make_review(pod))).response["allowed"] is True


# ---------------------------------------------------------------------- broken objects
def test_null_object_is_answered_as_a_review(engine):
    review = make_review(None)
    review["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    outcome = admission.validate(engine, request_of(review))
    assert outcome.response["allowed"] is False and outcome.response["status"]["code"] == 400
    mutated = admission.mutate(engine, request_of(review))
    assert mutated.response == {"uid": review["request"]["uid"], "allowed": True}


def test_containers_as_a_string_is_refused_with_the_field(engine):
    pod = gpu_pod()
    pod["spec"]["containers"] = "train"
    outcome = admission.validate(engine, request_of(make_review(pod)))
    assert outcome.response["allowed"] is False and outcome.response["status"]["code"] == 400
    assert "spec.containers" in outcome.response["status"]["message"]
    assert admission.mutate(engine, request_of(make_review(pod))).response["allowed"] is True


def test_unknown_kind_is_admitted(engine):
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ml"},
           "spec": {"containers": "whatever"}}
    outcome = admission.validate(engine, request_of(make_review(obj)))
    assert outcome.response == {"uid": outcome.uid, "allowed": True}


def test_unsupported_operation_is_refused(engine):
    review = make_review(gpu_pod(), operation="PATCH")
    assert admission.validate(engine, request_of(review)).response["status"]["code"] == 400


# ---------------------------------------------------------------------- mutate
def decode_patch(response):
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def test_mutation_applies_and_is_idempotent(engine):
    review = json.load(open("examples/pytorchjob-gpu.json"))
    outcome = admission.mutate(engine, request_of(review))
    assert outcome.outcome == "patched" and "shm-sized" in outcome.patched_policies
    patched = jsonpatch.apply_patch(review["request"]["object"], decode_patch(outcome.response))
    again = admission.mutate(engine, request_of(make_review(patched)))
    assert "patch" not in again.response and "patchType" not in again.response
    after = admission.validate(engine, request_of(make_review(patched)))
    assert "shm-sized" not in after.denied_policies


def test_nothing_to_change_means_no_patch(engine):
    outcome = admission.mutate(engine, request_of(make_review(gpu_pod())))
    assert outcome.response == {"uid": outcome.uid, "allowed": True}


def test_mutate_never_patches_a_pod_update(engine):
    old = gpu_pod(shm=False)
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"a": "b"}
    outcome = admission.mutate(engine, request_of(make_review(new, "UPDATE", old)))
    assert "patch" not in outcome.response


def test_mutate_update_only_when_the_template_changes(engine):
    old = deployment(shm=False)
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 5
    assert "patch" not in admission.mutate(engine, request_of(make_review(scaled, "UPDATE", old))).response
    changed = copy.deepcopy(old)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = IMAGE.replace("train@", "train2@")
    response = admission.mutate(engine, request_of(make_review(changed, "UPDATE", old))).response
    patched = jsonpatch.apply_patch(changed, decode_patch(response))
    assert any(v["name"] == "dshm" for v in patched["spec"]["template"]["spec"]["volumes"])


@pytest.mark.parametrize("ops, why", [
    ([{"op": "add", "path": "/spec/missing/volumes", "value": []}], "does not apply: member 'missing' not found"),
    ([{"op": "remove", "path": "/spec"}], "only well-formed 'add'"),
    ([{"op": "add", "path": "/spec/containers/5", "value": {}}], "does not apply: can't insert outside of list"),
    ([{"op": "add", "path": "spec", "value": 1}], "does not apply: Location must start with /"),
    ([{"op": "add", "path": "/metadata/name/x", "value": 1}], "does not apply"),
])
def test_check_patch_refuses_what_would_not_apply(ops, why):
    """The check is the jsonpatch library's (RFC 6902), not the code that built the patch."""
    assert why in admission.check_patch(gpu_pod(), ops)


def test_check_patch_agrees_with_jsonpatch_and_the_expected_result():
    doc = gpu_pod(shm=False)
    ops = [{"op": "add", "path": "/spec/volumes", "value": [{"name": "v"}]},
           {"op": "add", "path": "/spec/volumes/-", "value": {"name": "w"}},
           {"op": "add", "path": "/metadata/labels", "value": {"a/b": "c"}},
           {"op": "add", "path": "/metadata/labels/d~1e", "value": "f"}]
    expected = jsonpatch.apply_patch(doc, copy.deepcopy(ops))  # jsonpatch links values into the result
    assert admission.check_patch(doc, ops, expected) is None
    assert "does not give" in admission.check_patch(doc, ops, doc)


# ---------------------------------------------------------------------- error outcome
def test_internal_errors_fail_closed_on_validate_and_open_on_mutate():
    request = request_of(make_review(gpu_pod()))
    validate = responses.error_outcome(request, "validate", "boom")
    assert validate.response["allowed"] is False and validate.response["status"]["code"] == 500
    mutate = responses.error_outcome(request, "mutate", "boom")
    assert mutate.response["allowed"] is True and "patch" not in mutate.response


@pytest.mark.parametrize("patterns", [load_config(None).trusted_controllers, ("a*",), ("[ab]?c", "x*y"), ("*",),
                                      ("sys:[!x]*", "lit.eral")])
def test_trusted_globs_match_as_fnmatch_does(patterns):
    import fnmatch

    names = ["", "a", "abc", "bxc", "xy", "xzzy", "a\nb", "sys:y", "sys:x", "litXeral", "lit.eral", "lit.eral\n",
             "system:serviceaccount:kube-system:job-controller", "system:serviceaccount:evil:job-controller"]
    names += [p.replace("*", "zz") for p in patterns] + list(patterns)
    for name in names:
        assert bool(admission._globs(patterns).match(name)) == any(fnmatch.fnmatchcase(name, p) for p in patterns)


def test_one_line_takes_out_every_control_character_as_before():
    """one_line's shortcut for plain ASCII (isprintable) answers what the regex substitution answers, for every
    character below 0x80 and around it, alone and between others, stripped or not."""
    import re

    control = re.compile(r"[\x00-\x1f\x7f]+")
    texts = ["", " ", "plain text", "  padded  ", "é", "\u2028", "\u00a0x\u00a0", 42]
    for code in range(0x00, 0x100):
        char = chr(code)
        texts += [char, f"a{char}b", f"{char}edge{char}", f" {char} "]
    for text in texts:
        assert responses.one_line(text) == control.sub(" ", str(text)).strip(), repr(text)
