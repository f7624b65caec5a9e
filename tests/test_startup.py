"""What a one-file `aiadmit audit` (the pre-commit hook's run) does at start: only what the command uses.

Each run is a fresh process with a disk cache of its own (bench/startup.py measures the same command's CPU time).
The modules named here are those a one-file audit has no use for; importing one again would cost its import time
on every commit (bench/RESULTS.md)."""

import json
import os
import subprocess
import sys

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: gpu-pod, namespace: ml}
spec:
  containers:
    - name: main
      image: registry.example/serve:v1
      resources: {limits: {nvidia.com/gpu: "1"}}
"""

NOT_FOR_ONE_FILE = (
    "multiprocessing",  # --jobs: only a large input forks (app/parallel.py)
    "zoneinfo",  # a CEL rule naming a time zone (cel/timestamps.py)
    "jsonschema",  # the schema checks of the bundle are on record (policies/checked.json)
    "cel.cel",  # the reference CEL library: every built-in expression compiles natively
    "ruamel.yaml",  # `aiadmit fix`
    "dataclasses", "inspect",  # the audit's value classes are written out (model/valueclass.py)
    "webhook.app.policytest",  # `aiadmit test`
    "webhook.app.commands.serve", "webhook.app.commands.test", "webhook.app.commands.fix",
    "webhook.app.commands.cel", "webhook.app.commands.certs", "webhook.app.commands.policies",
    "webhook.app.server", "webhook.app.serving", "webhook.app.clusteraudit",
)

# The command line as the console script runs it, the CEL checker counted, then what was imported.
PROBE = """
import json, sys
from webhook.cel import environment
calls = []
real = environment.checked
environment.checked = lambda *args: calls.append(args[0]) or real(*args)
sys.argv = ["aiadmit", "audit", sys.argv[1]]
from webhook.app.cli import main
code = main()
print(json.dumps({"code": code, "checked": len(calls), "modules": sorted(sys.modules)}))
"""


def _audit(tmp_path) -> dict:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    env = dict(os.environ, AIADMIT_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("AIADMIT_NO_CACHE", None)
    run = subprocess.run([sys.executable, "-c", PROBE, str(manifest)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_a_one_file_audit_imports_only_what_it_uses(tmp_path):
    cold, warm = _audit(tmp_path), _audit(tmp_path)
    assert cold["code"] == warm["code"] == 1  # the GPU pod has findings
    for run in (cold, warm):
        assert [name for name in NOT_FOR_ONE_FILE if name in run["modules"]] == []


def test_a_one_file_audit_runs_no_cel_check_of_the_built_in_bundle(tmp_path):
    # Its checks are on record (policies/checked.json, language/celrecord.py), even on a first run with no cache.
    cold, warm = _audit(tmp_path), _audit(tmp_path)
    assert cold["checked"] == warm["checked"] == 0
