"""The diagnostics the other commands print take the one form too (`file:line:col: severity: message`, on stderr,
docs/cli.md): a config naming a policy id that is not loaded, `aiadmit test --init`'s errors and its TODO, every
`aiadmit cel` problem; and a Helm action written as `name: {{ .Values.x }}` (which YAML reads as a flow map) is a
template left unchecked, as the docs say, not an input error."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from testdata import ROOT

DIAGNOSTIC = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?P<column>\d+): (?P<severity>error|warning): \S")
SAMPLE = "examples/manifests/pytorchjob-gpu.yaml"


def aiadmit(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": ROOT})


def config(tmp_path, body: str):
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: aiadmit.dev/v1alpha1\nkind: Config\n" + body)
    return path


def test_a_config_naming_an_unknown_policy_is_an_error_at_its_line_with_the_closest_id(tmp_path):
    path = config(tmp_path, "policies:\n  shm-sized: {action: warn}\n  shm-sizd: {action: warn}\n")
    done = aiadmit("audit", "--config", str(path), SAMPLE)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.splitlines() == [f"{path}:5:3: error: policies.shm-sizd: unknown policy id 'shm-sizd' (did "
                                        f"you mean 'shm-sized'?)"], done.stderr


def test_an_exception_naming_an_unknown_policy_is_an_error_it_would_exempt_nothing(tmp_path):
    path = config(tmp_path, "exceptions:\n  - name: research\n    policies: [shm-sized, shm-sizd]\n"
                            "    namespaces: [research]\n    reason: measured by hand\n")
    done = aiadmit("policies", "--config", str(path))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"{path}:5:27: error: exception research: policies: unknown policy id "
                                        f"'shm-sizd' (did you mean 'shm-sized'?)"], done.stderr
    path.write_text(path.read_text().replace(", shm-sizd", ""))
    assert aiadmit("policies", "--config", str(path)).returncode == 0


def test_the_default_configs_exceptions_do_not_stop_a_run_of_ones_own_policies(tmp_path):
    """The defaults' exceptions name built-in policies; with `--policies` only one's own are loaded."""
    done = aiadmit("policies", "--policies", "examples/policies/team-label.yaml")
    assert done.returncode == 0 and done.stdout.startswith("team-label"), done.stderr


def test_init_prints_its_problems_and_its_todo_as_diagnostics(tmp_path):
    policy = tmp_path / "team-label.yaml"
    with open(os.path.join(ROOT, "examples", "policies", "team-label.yaml"), encoding="utf-8") as handle:
        policy.write_text(handle.read())
    done = aiadmit("test", "--init", str(policy))
    assert done.returncode == 0, done.stderr
    test = tmp_path / "tests" / "team-label" / "test.yaml"
    (todo,) = done.stderr.splitlines()
    assert todo == f"{test}:2:1: warning: team-label-passes: the policy says fail: edit it until the policy passes it"
    assert test.read_text().splitlines()[1].startswith("# TODO team-label-passes:")
    again = aiadmit("test", "--init", str(policy))
    assert again.returncode == 2
    assert again.stderr.splitlines() == [f"{test}:0:0: error: exists; --init does not overwrite"], again.stderr
    policy.write_text(policy.read_text().replace("anyClasses: [ai]", "anyClasses: [ai]\n  kinds: [Deploymnet]"))
    broken = aiadmit("test", "--init", str(policy), "-o", str(tmp_path / "other"))
    assert broken.returncode == 2
    (line,) = broken.stderr.splitlines()
    assert line.startswith(f"{policy}:12:11: error: match.kinds[0]: kind 'Deploymnet'"), line


def test_every_cel_command_problem_has_the_one_form(tmp_path):
    pods = tmp_path / "pods.yaml"
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {{name: {}, namespace: ml}}\nspec:\n  containers: [{{name: c}}]\n"
    pods.write_text(pod.format("a") + "---\n" + pod.format("b"))
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    cases = [
        (["has(contaner.name)", "--object", SAMPLE], 2, "<expression>:1:5: error: undeclared reference"),
        (["container.nope", "--object", SAMPLE], 1, "<expression>:0:0: error: evaluation: no such key: nope"),
        (["object.kind", "--object", str(pods)], 2, f"{pods}:0:0: error: the file holds 2 objects"),
        (["object.kind", "--object", str(empty)], 2, f"{empty}:0:0: error: no Kubernetes object found"),
        (["container.name", "--object", SAMPLE, "--policy", "policies/shm-sized.yaml", "--rule", "nope"], 2,
         "policies/shm-sized.yaml:0:0: error: no rule 'nope'"),
        (["object.kind", "--object", SAMPLE, "--policy", "policies/untrusted-sandbox.yaml"], 0,
         f"{SAMPLE}:4:1: warning: policy untrusted-sandbox does not apply to this object"),
    ]
    for arguments, code, first in cases:
        done = aiadmit("cel", *arguments)
        assert done.returncode == code, (arguments, done.stdout, done.stderr)
        lines = done.stderr.splitlines()
        assert lines and lines[0].startswith(first) and DIAGNOSTIC.match(lines[0]), (arguments, done.stderr)


def test_a_helm_action_that_yaml_reads_as_a_flow_map_is_a_template_left_unchecked(tmp_path):
    chart = tmp_path / "deployment.yaml"
    chart.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Values.name }}\nspec:\n"
                     "  containers: [{name: c, image: x}]\n---\n"
                     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: ml}\n")
    done = aiadmit("audit", "-f", "json", str(chart))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"{chart}:4:10: warning: template (contains '{{{{ }}}}'): render it first"]
    # a real YAML error in a file without an action is still an error
    chart.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {a: {b: c}}: x\n")
    assert aiadmit("audit", str(chart)).returncode == 2
