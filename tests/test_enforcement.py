"""Config actions, namespace enforcement labels, exceptions with expiry, annotation exemptions, exclusions."""

import datetime as dt
import textwrap

import pytest

from webhook.language.config import ConfigError, load_config
from webhook.engine.core import Engine
from webhook.model.facts import OfflineFacts
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.loader import load_policies
from webhook.model.resource import Resource


def gpu_pod(name="gpu", namespace="ml", annotations=None):
    return Resource({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "main", "image": "img",
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    })


def namespace(name, labels):
    return Resource({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})


def engine_with(tmp_path, config_text=None):
    path = None
    if config_text is not None:
        path = tmp_path / "config.yaml"
        path.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\n" + textwrap.dedent(config_text))
    config = load_config(str(path) if path else None)
    return Engine(load_policies([BUILTIN_POLICY_DIR], config.params()), config)


def actions(evaluation, policy):
    return {f.action for f in evaluation.findings if f.policy == policy}


def test_default_actions(tmp_path):
    evaluation = engine_with(tmp_path).evaluate(gpu_pod())
    assert actions(evaluation, "resources-declared") == {"deny"}
    assert evaluation.blocking


def test_config_lowers_a_policy_and_rule_actions_follow(tmp_path):
    engine = engine_with(tmp_path, "policies:\n  resources-declared: {action: audit}\n")
    assert actions(engine.evaluate(gpu_pod()), "resources-declared") == {"audit"}


def test_config_disables_a_policy(tmp_path):
    engine = engine_with(tmp_path, "policies:\n  shm-sized: {enabled: false}\n")
    assert not actions(engine.evaluate(gpu_pod()), "shm-sized")
    assert "shm-sized" not in engine.mutate(gpu_pod()).by_policy  # other policies (priority-class) still mutate


def test_config_params_reach_the_rules(tmp_path):
    engine = engine_with(tmp_path, "policies:\n  shm-sized: {params: {shmMinimum: 3Gi}}\n")
    [volume] = [op for op in engine.mutate(gpu_pod()).operations if op["path"] == "/spec/volumes"]
    assert volume["value"][0]["emptyDir"]["sizeLimit"] == "3Gi"


def test_unknown_policy_in_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError):
        engine_with(tmp_path, "policies:\n  no-such-policy: {action: warn}\n")


@pytest.mark.parametrize("label, expected", [("warn", {"warn"}), ("audit", {"audit"}), ("deny", {"deny"}),
                                             ("bogus", {"deny"})])
def test_namespace_label_lowers_never_raises(tmp_path, label, expected):
    engine = engine_with(tmp_path)
    facts = OfflineFacts([namespace("ml", {"aiadmit.dev/enforcement": label})])
    assert actions(engine.evaluate(gpu_pod(), facts), "resources-declared") == expected


def test_namespace_audit_label_stops_mutation(tmp_path):
    engine = engine_with(tmp_path)
    facts = OfflineFacts([namespace("ml", {"aiadmit.dev/enforcement": "audit"})])
    assert engine.mutate(gpu_pod(), facts).operations == []
    assert engine.mutate(gpu_pod()).operations


def test_exception_applies_by_namespace_and_name(tmp_path):
    engine = engine_with(tmp_path, """\
        exceptions:
          - name: legacy-trainer
            policies: [resources-declared]
            namespaces: [ml]
            names: ["legacy-*"]
            reason: migrating by end of quarter
        """)
    assert not actions(engine.evaluate(gpu_pod("legacy-1")), "resources-declared")
    assert actions(engine.evaluate(gpu_pod("new-1")), "resources-declared") == {"deny"}
    assert actions(engine.evaluate(gpu_pod("legacy-1", namespace="other")), "resources-declared") == {"deny"}


def test_expired_exception_stops_applying_and_says_so(tmp_path):
    yesterday = (dt.date.today() - dt.timedelta(days=1)).isoformat()
    engine = engine_with(tmp_path, f"""\
        exceptions:
          - name: old
            policies: ["*"]
            reason: temporary
            expires: "{yesterday}"
        """)
    evaluation = engine.evaluate(gpu_pod())
    assert actions(evaluation, "resources-declared") == {"deny"}
    assert any("exception 'old'" in note and "expired" in note for note in evaluation.notes)


def test_exception_needs_a_reason(tmp_path):
    with pytest.raises(ConfigError) as info:
        engine_with(tmp_path, "exceptions:\n  - {name: x, policies: [shm-sized]}\n")
    assert "'reason' is a required property" in str(info.value)


def test_annotation_exempts_only_where_config_allows(tmp_path):
    pod = gpu_pod(annotations={"aiadmit.dev/exempt": "shm-sized, resources-declared"})
    default = engine_with(tmp_path).evaluate(pod)
    assert actions(default, "shm-sized") and actions(default, "resources-declared")
    allowing = engine_with(tmp_path, "annotationExemptable: [shm-sized]\n").evaluate(pod)
    assert not actions(allowing, "shm-sized")
    assert actions(allowing, "resources-declared") == {"deny"}


@pytest.mark.parametrize("ns", ["kube-system", "kube-public", "kube-node-lease", "aiadmit-system"])
def test_system_namespaces_are_excluded(tmp_path, ns):
    engine = engine_with(tmp_path)
    assert engine.evaluate(gpu_pod(namespace=ns)).findings == []
    assert engine.mutate(gpu_pod(namespace=ns)).operations == []


def test_own_namespace_is_excluded():
    engine = Engine.load(own_namespace="platform-admission")
    assert engine.evaluate(gpu_pod(namespace="platform-admission")).findings == []
