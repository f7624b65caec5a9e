"""Every command the README and docs/cli.md show runs as written (those that can run offline), with the exit code
the docs promise; the sample reviews get the answers the README describes from the real server.

The commands are read from the documents' code blocks, so a command added to the docs without a line here fails
`test_every_documented_command_is_known`: the docs cannot drift from what runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from serverproc import start_server
from testdata import NO_KUBECTL, ROOT, cached_kubectl

DOCS = ("README.md", os.path.join("docs", "cli.md"), os.path.join("docs", "policy-tests.md"))

# command as written -> exit code (run in a copy of the repository, so `fix` may write)
RUNS = {
    "aiadmit audit examples/manifests/": 1,
    "aiadmit audit -f json examples/manifests/": 1,
    "aiadmit audit examples/manifests/pytorchjob-gpu.yaml": 1,
    "aiadmit policies": 0,
    "aiadmit test tests/policies": 0,
    "aiadmit test -f json tests/policies/shm-sized": 0,
    "aiadmit test examples/update-test": 0,
    "aiadmit test --init examples/policies/team-label.yaml": 0,
    "aiadmit fix --diff examples/manifests/": 1,
    "aiadmit fix --check examples/manifests/": 1,
    "aiadmit fix examples/manifests/": 0,
    "aiadmit audit --policies examples/vap/replicas.yaml examples/vap/deployments.yaml": 1,
    "aiadmit audit --policies examples/map/sidecar.yaml examples/map/pods.yaml": 0,
    "aiadmit fix --diff --policies examples/map/sidecar.yaml examples/map/pods.yaml": 1,
    "aiadmit cel 'variables.memoryShm' --object examples/manifests/pytorchjob-gpu.yaml --policy "
    "policies/shm-sized.yaml --rule mounted": 0,
    "aiadmit cel variables.memoryLimit --object examples/manifests/pytorchjob-gpu-compliant.yaml --policy "
    "policies/shm-sized.yaml --template Worker": 0,
    "aiadmit cel 'variables.holdsDevice && variables.memoryLimt' --object "
    "examples/manifests/pytorchjob-gpu-compliant.yaml --policy policies/shm-sized.yaml": 2,
    "aiadmit cel 'has(object.metadata.`name`)' --object examples/manifests/pytorchjob-gpu.yaml --level object": 2,
    "aiadmit cel 'has(object.metadata.`name`)' --object examples/manifests/pytorchjob-gpu.yaml --level object "
    "--kubernetes-version 1.37": 0,
    "aiadmit export --out exported/": 0,
    "aiadmit export --kubernetes-version 1.35 --out exported-1.35/": 0,
    "aiadmit export --format static --out static/": 0,
    "aiadmit export --check": 0,
    "aiadmit cel variables.memoryShm --object tests/policies/shm-sized/resources.yaml --policy "
    "policies/shm-sized.yaml": 2,
    "aiadmit cel variables.memoryShm --object tests/policies/shm-sized/resources.yaml --policy "
    "policies/shm-sized.yaml --document 2": 0,
    "aiadmit cel variables.memoryShm --object tests/policies/shm-sized/resources.yaml --policy "
    "policies/shm-sized.yaml --name no-shm": 0,
}
# piped from kubectl (run when a kubectl is on this machine)
KUBECTL = {
    "kubectl kustomize manifests/base | aiadmit audit -": 0,
    "kubectl kustomize manifests/base | aiadmit audit --format sarif - > aiadmit.sarif": 0,
}
# what cannot run offline or names the reader's own files (the docs say "your ...")
NOT_OFFLINE = {
    "aiadmit audit --cluster -A",
    "aiadmit audit --extra-policies my-policies/ examples/manifests/",
    "helm install aiadmit charts/aiadmit -n aiadmit-system --create-namespace \\",  # installs into a cluster
    "helm template my-release ./my-chart | aiadmit audit -",
    "helm template my-release ./my-chart -f values-prod.yaml | aiadmit audit -",
    "python3 -m pip install -e '.[test]' && aiadmit serve --dev",
    "python3 -m pip install -e '.[test]' && python3 -m pytest -q tests",
}


def documented_comments() -> dict[str, str]:
    """Lines of the documents' sh/unlabelled code blocks that run aiadmit, without their trailing comments -> the
    comment (what the docs say the command answers; "" for none)."""
    found: dict[str, str] = {}
    for name in DOCS:
        with open(os.path.join(ROOT, name), encoding="utf-8") as handle:
            text = handle.read()
        # Every fenced block, whatever its language, so that a block's closing fence is never read as an opening
        # one (a yaml block's end followed by prose naming `aiadmit fix` was once taken for a command); then the
        # sh and unlabelled ones.
        blocks = [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)
                  if lang in ("", "sh")]
        for block in blocks:
            for line in block.splitlines():
                comment = re.search(r"\s+#\s(.*)$", line)
                command = line[:comment.start()].strip() if comment else line.strip()
                if "aiadmit " in command and not command.startswith(("#", "curl")):
                    found[command] = found.get(command) or (comment.group(1).strip() if comment else "")
    return found


def documented_commands() -> set[str]:
    return set(documented_comments())


# What a comment states outright (not "exit 1 if ..."): an exit code, optionally with the start of the message
# (`exit 2: the file holds 14 objects (1: ..., ...)`), or the value printed (`true`, `17179869184.0`, `false: ...`)
_STATED_EXIT = re.compile(r"^exit (\d)(?::\s*(.*))?$")
_STATED_VALUE = re.compile(r'^(true|false|-?\d[\d.]*|"[^"]*")(?::|$)')


def test_every_documented_command_is_known():
    unknown = documented_commands() - set(RUNS) - set(KUBECTL) - NOT_OFFLINE
    assert not unknown, f"documented commands this test does not run or list as not offline: {sorted(unknown)}"


@pytest.fixture()
def checkout(tmp_path):
    """A copy of what the commands read (examples, policy tests, manifests): `fix` may write into it."""
    for name in ("examples", os.path.join("tests", "policies"), "manifests", "policies"):
        shutil.copytree(os.path.join(ROOT, name), tmp_path / name, ignore=shutil.ignore_patterns("certs"))
    return tmp_path


def run(command: str, cwd, kubectl: str | None = None) -> subprocess.CompletedProcess:
    aiadmit = f"{shlex.quote(sys.executable)} -m webhook"
    line = command.replace("aiadmit ", aiadmit + " ")
    if kubectl:
        line = line.replace("kubectl ", shlex.quote(kubectl) + " ", 1)
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.parametrize("command", sorted(RUNS))
def test_documented_command_runs_with_the_documented_exit_code(command, checkout):
    done = run(command, checkout)
    assert done.returncode == RUNS[command], f"{command}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr}"
    assert "Traceback" not in done.stderr
    said = documented_comments().get(command, "")
    stated = _STATED_EXIT.match(said)
    if stated:  # the docs' own words agree with the table above and with what runs
        assert done.returncode == int(stated.group(1)), (command, said)
        message = (stated.group(2) or "").partition("...")
        if message[1]:  # the message as the docs quote it, up to their `...`
            assert message[0] in done.stderr, (command, said, done.stderr)
    value = _STATED_VALUE.match(said)
    if value:
        assert done.stdout.strip() == value.group(1), (command, said, done.stdout)
    if said.startswith("scaffold: "):  # `--init`: the directory the docs say it writes
        written = checkout / said.split(": ", 1)[1]
        assert (written / "test.yaml").is_file() and (written / "resources.yaml").is_file(), (command, said)


def test_fix_then_audit_passes_the_policies_fix_addresses(checkout):
    """After the README's `fix`, the sample has nothing left for the mutating policies to report."""
    assert run("aiadmit fix examples/manifests/", checkout).returncode == 0
    audit = json.loads(run("aiadmit audit -f json examples/manifests/pytorchjob-gpu.yaml", checkout).stdout)
    assert not [f for f in audit["findings"] if f["policy"] == "shm-sized" and f["result"] == "fail"]


@pytest.mark.parametrize("command", sorted(KUBECTL))
def test_documented_kubectl_pipe(command, checkout):
    kubectl = cached_kubectl()
    if not kubectl:
        pytest.skip(NO_KUBECTL)
    done = run(command, checkout, kubectl)
    assert done.returncode == KUBECTL[command], f"{command}: exit {done.returncode}\n{done.stderr}"


def test_missing_paths_are_exit_2(checkout):
    for command in ("aiadmit test no/such/dir", "aiadmit audit no/such/file.yaml", "aiadmit fix no/such/dir"):
        done = run(command, checkout)
        assert done.returncode == 2, f"{command}: exit {done.returncode}\n{done.stderr}"
        assert "no/such" in done.stdout + done.stderr and "Traceback" not in done.stderr


def test_extra_policies_add_to_the_bundle(checkout):
    own = checkout / "my-policies"
    own.mkdir()
    shutil.copy(os.path.join(ROOT, "examples", "policies", "team-label.yaml"), own / "team-label.yaml")
    bundle = run("aiadmit policies", checkout).stdout.splitlines()
    both = run("aiadmit policies --extra-policies my-policies/", checkout).stdout.splitlines()
    assert len(both) == len(bundle) + 1 and any(line.startswith("team-label") for line in both)
    audit = json.loads(run("aiadmit audit -f json --extra-policies my-policies/ "
                           "examples/manifests/pytorchjob-gpu-compliant.yaml", checkout).stdout)
    assert {f["policy"] for f in audit["findings"] if f["result"] == "fail"} == {"team-label"}
    twice = run("aiadmit policies --extra-policies policies/shm-sized.yaml", checkout)
    assert twice.returncode == 2 and "already defined" in twice.stderr


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory):
    """The server as `aiadmit serve --dev` runs it (built-in policies, no cluster), on a free port."""
    with start_server(tmp_path_factory.mktemp("dev"), ["--no-cluster"]) as running:
        yield running


def _review(name: str) -> dict:
    with open(os.path.join(ROOT, "examples", name), encoding="utf-8") as handle:
        return json.load(handle)


def test_readme_samples_get_the_answers_the_readme_describes(dev_server):
    status, denied = dev_server.review("validate", _review("pytorchjob-gpu.json"))
    assert status == 200 and denied["response"]["allowed"] is False
    lines = denied["response"]["status"]["message"].splitlines()
    assert {"shm-sized", "resources-declared"} <= {line.split(":", 1)[0] for line in lines[1:]}
    status, mutated = dev_server.review("mutate", _review("pytorchjob-gpu.json"))
    assert status == 200 and mutated["response"]["patchType"] == "JSONPatch"
    status, allowed = dev_server.review("validate", _review("pytorchjob-gpu-compliant.json"))
    assert status == 200 and allowed["response"]["allowed"] is True, allowed["response"]
    assert not allowed["response"].get("warnings"), allowed["response"]["warnings"]
    for sample in ("configmap.json", "pytorchjob-gpu-relabel-update.json"):
        status, answer = dev_server.review("validate", _review(sample))
        assert status == 200 and answer["response"]["allowed"] is True, (sample, answer["response"])
