"""Every bad input is an answer (issue 12, item 3): a 400 or a denial naming the field from the webhook, an error
naming file, line and field from the audit (which goes on with everything else and exits 2); never a traceback,
never a 500, never a hang. Every test here is bounded in time."""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from serverproc import make_review
from webhook.app.audit import audit_paths
from webhook.app.server import EngineSource, Settings, create_app
from webhook.engine.core import Engine
from webhook.inputs.sources import load_text
from webhook.language.config import ConfigError, load_config
from webhook.language.loader import PolicyLoadError, load_policies
from webhook.model.facts import NoFacts
from webhook.model.quantity import QuantityError, parse_quantity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD = textwrap.dedent("""\
    apiVersion: v1
    kind: Pod
    metadata: {name: good}
    spec:
      containers: [{name: c, image: x, env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]}]
    """)
POD_HEAD = "apiVersion: v1\nkind: Pod\n"
# name -> (document, the field the error must name)
BAD = {
    "labels-int": (POD_HEAD + "metadata:\n  name: a\n  labels: 1\nspec:\n  containers: [{name: c, image: x}]\n",
                   "metadata.labels"),
    "annotations-list": (POD_HEAD + "metadata:\n  name: a\n  annotations: [x]\nspec:\n  containers: [{name: c}]\n",
                         "metadata.annotations"),
    "label-value-map": (POD_HEAD + "metadata:\n  name: a\n  labels: {app: {x: 1}}\nspec:\n  containers: []\n",
                        "metadata.labels.app"),
    "template-labels": ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n"
                        "    metadata: {labels: 7}\n    spec:\n      containers: [{name: c, image: x}]\n",
                        "spec.template.metadata.labels"),
    "template-metadata": ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n"
                          "    metadata: [1]\n    spec:\n      containers: [{name: c, image: x}]\n",
                          "spec.template.metadata"),
    "nan": (POD_HEAD + "metadata: {name: a}\nspec:\n  containers: [{name: c, resources: {limits: {cpu: .nan}}}]\n",
            "resources.limits.cpu"),
    "inf": (POD_HEAD + "metadata: {name: a}\nspec:\n  containers: [{name: c, resources: {limits: {memory: 1e400}}}]\n",
            "resources.limits.memory"),
    "minus-inf": (POD_HEAD + "metadata: {name: a}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: -.inf}}}]\n",
                  "resources.requests.cpu"),
    "huge-exponent": (POD_HEAD + "metadata: {name: a}\nspec:\n  containers: [{name: c, resources: {limits: {cpu: 1e999999}}}]\n",
                      "resources.limits.cpu"),
    "huge-exponent-string": (POD_HEAD + "metadata: {name: a}\nspec:\n  containers: [{name: c, resources: "
                             "{limits: {cpu: '1e99999999999'}}}]\n", "resources.limits.cpu"),
    "many-digits": (POD_HEAD + "metadata: {name: a}\nspec:\n  containers: [{name: c, resources: {limits: {cpu: "
                    + "9" * 6000 + "}}}]\n", "resources.limits.cpu"),  # a string to go-yaml: past float64
    "many-digits-string": (POD_HEAD + "metadata: {name: a}\nspec:\n  containers: [{name: c, resources: {limits: "
                           "{cpu: '" + "9" * 6000 + "'}}}]\n", "resources.limits.cpu"),
    "overflow-int": (POD_HEAD + "metadata: {name: a}\nspec:\n  containers: [{name: c, resources: {limits: "
                     "{nvidia.com/gpu: 99999999999999999999999}}}]\n", "resources.limits.nvidia.com/gpu"),
}


@pytest.fixture(scope="module")
def engine():
    return Engine.load()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 10 ** 30, "9" * 6000,
                                   "1e99999999999", "1" * 5000 + "Gi", "8Ei"])
def test_quantities_beyond_kubernetes_are_errors_not_crashes(value):
    with pytest.raises(QuantityError):
        parse_quantity(value)
    assert parse_quantity("7Ei") == 7 * 2 ** 60 and parse_quantity(2 ** 62) == 2 ** 62


def test_audit_reports_every_bad_document_and_goes_on(tmp_path, engine):
    for name, (text, _) in BAD.items():
        (tmp_path / f"{name}.yaml").write_text(text + "---\n" + GOOD.replace("name: good", f"name: good-{name}"))
    (tmp_path / "zz-good.yaml").write_text(GOOD)
    result = audit_paths(engine, [str(tmp_path)])
    assert result.exit_code() == 2
    by_file = {}
    for error in result.errors:
        by_file.setdefault(os.path.basename(error.file), []).append(error)
    for name, (text, field) in BAD.items():
        errors = by_file.get(f"{name}.yaml")
        assert errors, f"{name}: no error reported"
        assert any(e.line > 0 and field in e.message for e in errors), (name, errors)
    # the good document after each bad one, and the good file, were all checked
    names = {e.resource.name for e in result.evaluations if any(f.policy == "devices-declared" and f.result == "fail"
                                                                 for f in e.findings)}
    assert {"good"} | {f"good-{n}" for n in BAD} <= names, sorted(names)


def test_audit_command_exits_2_with_file_line_and_field_and_no_traceback(tmp_path):
    (tmp_path / "bad.yaml").write_text(BAD["labels-int"][0])
    (tmp_path / "nan.yaml").write_text(BAD["nan"][0])
    (tmp_path / "good.yaml").write_text(GOOD)
    done = subprocess.run([sys.executable, "-m", "webhook", "audit", "--jobs", "1", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    # input errors are diagnostics: stderr, `file:line:col: error: message`
    assert f"{tmp_path / 'bad.yaml'}:5:" in done.stderr and "metadata.labels" in done.stderr
    assert f"{tmp_path / 'nan.yaml'}:" in done.stderr and "resources.limits.cpu" in done.stderr
    assert all(": error: " in line for line in done.stderr.splitlines())
    assert "NVIDIA_VISIBLE_DEVICES=all" in done.stdout  # the good file is still reported


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
def test_webhook_answers_bad_objects_as_reviews_naming_the_field(engine, name, endpoint):
    text, field = BAD[name]
    loaded = load_text(text, "x.yaml")
    if not loaded.resources:  # YAML-only shapes (6,000-digit integers) cannot come as JSON from the API server
        assert loaded.errors and field in loaded.errors[0].message or loaded.errors
        return
    obj = loaded.resources[0].obj
    try:
        body = json.dumps(make_review(obj), allow_nan=True)
    except ValueError:
        pytest.skip("not expressible as JSON")
    client = create_app(EngineSource(engine, NoFacts()), settings=Settings()).test_client()
    review = json.loads(body)
    answer = client.post(endpoint, data=body, content_type="application/json")
    assert answer.status_code in (200, 400), answer.data
    if answer.status_code == 400:
        assert field.split(".")[-1] in answer.get_json()["error"]
        return
    response = answer.get_json()["response"]
    assert response["uid"] == review["request"]["uid"]
    if endpoint == "/validate":
        assert response["allowed"] is False and response["status"]["code"] == 400, response
        assert jsonish(field) in response["status"]["message"], response["status"]["message"]


def jsonish(field):
    return field.split("cpu")[0] if field == "cpu" else field


# ------------------------------------------------------------------------------------------------ files
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_and_other_non_regular_files_are_skipped_with_an_error(tmp_path, engine):
    os.mkfifo(tmp_path / "x.yaml")
    (tmp_path / "good.yaml").write_text(GOOD)
    result = {}
    worker = threading.Thread(target=lambda: result.update(r=audit_paths(engine, [str(tmp_path)])), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the reader so the test process can end
        with open(tmp_path / "x.yaml", "w"):
            pass
        pytest.fail("a FIFO named x.yaml blocked the audit")
    audited = result["r"]
    assert audited.exit_code() == 2
    assert [os.path.basename(e.file) for e in audited.errors] == ["x.yaml"]
    assert "not a regular file" in audited.errors[0].message
    assert any(e.resource.name == "good" for e in audited.evaluations)


def test_fifo_named_on_the_command_line_does_not_block(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "webhook", "audit", str(fifo)], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 2 and "not a regular file" in done.stdout + done.stderr


# ------------------------------------------------------------------------------------------------ alias bombs
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8))


def test_alias_bomb_in_a_manifest_is_an_error_within_a_second(tmp_path):
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n" + textwrap.indent(BOMB, "  ")
    started = time.monotonic()
    loaded = load_text(text, "bomb.yaml")
    assert time.monotonic() - started < 1.0
    assert not loaded.resources and loaded.errors
    assert loaded.errors[0].file == "bomb.yaml" and "alias" in loaded.errors[0].message
    assert loaded.errors[0].line > 0


def test_recursive_alias_is_an_error():
    loaded = load_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: r}\ndata: &d {a: *d}\n", "r.yaml")
    assert not loaded.resources and "alias" in loaded.errors[0].message


def bounded(call, seconds: float = 5.0):
    """`call()` in a thread, given `seconds`: (its exception or result, elapsed); a hang fails the test."""
    outcome = {}

    def run():
        started = time.monotonic()
        try:
            outcome["value"] = call()
        except Exception as exc:  # noqa: BLE001 - the caller asserts on it
            outcome["value"] = exc
        outcome["seconds"] = time.monotonic() - started

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"still running after {seconds} s")
    return outcome["value"], outcome["seconds"]


def test_alias_bomb_in_a_policy_file_is_an_error_within_a_second(tmp_path):
    """Before: the loader was still running after 90 s (schema validation walked the expansion)."""
    path = tmp_path / "bomb.yaml"
    path.write_text("lol:\n" + textwrap.indent(BOMB, "  ") +
                    "apiVersion: aiadmit.dev/v1alpha1\nkind: Policy\nmetadata: {name: bomb}\nsummary: s\n"
                    "why: w\nremediation: r\naction: deny\ntarget: pod\nmatch: {classes: *i}\n"
                    "rules:\n- {name: r, expression: 'true', message: m}\n")
    raised, seconds = bounded(lambda: load_policies([str(path)]))
    assert isinstance(raised, PolicyLoadError), raised
    assert seconds < 1.0
    assert "bomb.yaml" in str(raised) and "alias" in str(raised)


def test_alias_bomb_in_a_config_file_is_an_error_within_a_second(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("lol:\n" + textwrap.indent(BOMB, "  ") +
                    "apiVersion: aiadmit.dev/v1alpha1\nkind: Config\nexcludeNamespaces: *i\n")
    raised, seconds = bounded(lambda: load_config(str(path)))
    assert isinstance(raised, ConfigError), raised
    assert seconds < 1.0
    assert "config.yaml" in str(raised) and "alias" in str(raised)


def test_modest_anchors_still_load():
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
            "  - {name: a, image: x, env: &env [{name: A, value: '1'}, {name: B, value: '2'}]}\n"
            "  - {name: b, image: x, env: *env}\n")
    loaded = load_text(text, "ok.yaml")
    assert not loaded.errors and loaded.resources[0].obj["spec"]["containers"][1]["env"][1]["value"] == "2"


def test_an_anchor_without_alias_and_a_shell_ampersand_load_as_written():
    """A text with an `&` but no `*` has no alias (the loader then skips its alias bookkeeping): its values, its
    positions and its input errors are those of the walk that keeps it."""
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: &l {app: a}}\nspec:\n  containers:\n"
            "  - name: a\n    image: x\n    command: [sh, -c, 'make && run']\n    args: &args [--port, 8080]\n")
    loaded = load_text(text, "amp.yaml")
    assert not loaded.errors
    obj = loaded.resources[0].obj
    assert obj["metadata"]["labels"] == {"app": "a"}
    assert obj["spec"]["containers"][0]["command"][2] == "make && run"
    assert obj["spec"]["containers"][0]["args"] == ["--port", 8080]
    assert loaded.resources[0].origin.position("/spec/containers/0/args/1") == (9, 26)
    twice = load_text(text.replace("{app: a}", "{app: a, app: b}"), "amp.yaml")
    assert not twice.resources and "duplicate key 'app'" in twice.errors[0].message


def test_deep_nesting_is_an_error_not_a_crash():
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d}\ndata: " + "[" * 5000 + "]" * 5000 + "\n"
    loaded = load_text(text, "deep.yaml")
    assert loaded.errors and loaded.errors[0].file == "deep.yaml"
