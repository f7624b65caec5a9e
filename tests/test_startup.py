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
    # exact quantities: the Pod's "1" is a plain count (model/quantity.py `plain_count`), and neither a load nor a
    # rule it runs needs a quantity's exact value (cel/quantities.py); decimal and numbers come with fractions
    "fractions", "decimal", "numbers",
    "pickle",  # a kept bundle is read and written with pickle's classes from _pickle (language/bundlecache.py)
)

# What a warm run (the disk cache holds the loaded bundle, language/bundlecache.py) has no use for besides: all
# that only a load uses. The bundle is read back whole, so nothing is parsed, checked, costed, generated or compiled,
# and a bundle with no in-tree policy runs none of their engine.
NOT_FOR_A_WARM_RUN = (
    "webhook.cel.lexer", "webhook.cel.parser", "webhook.cel.checker", "webhook.cel.cost", "webhook.cel.strictness",
    "webhook.cel.patterns", "webhook.cel.portability", "webhook.cel.generator", "webhook.cel.folding",
    "webhook.cel.comprehensions", "webhook.cel.sums",
    "webhook.language.compiler", "webhook.language.guards", "webhook.language.transcript",
    "webhook.language.celrecord", "webhook.language.parsed", "webhook.language.sourcemap",
    "webhook.language.declarations", "webhook.language.mapload", "webhook.language.objects",
    "webhook.engine.vap", "webhook.engine.mapeval", "webhook.engine.mapreport", "webhook.engine.mutation",
    "webhook.k8s.defaults", "webhook.k8s.applymerge",
)

# The command line as the console script runs it, the CEL checker counted, the CEL code's digest and the kinds
# table's specs counted (a kept bundle carries both), whether policies/checked.json was read, then what was imported.
PROBE = """
import json, sys
from webhook.cel import environment, stored
from webhook.k8s import kindtable
calls, fed, specs = [], [], []
real, feed, spec = environment.checked, stored.feed, kindtable.template_spec
environment.checked = lambda *args: calls.append(args[0]) or real(*args)
stored.feed = lambda *args: fed.append(args[1]) or feed(*args)
kindtable.template_spec = lambda *args: specs.append(1) or spec(*args)
sys.argv = ["aiadmit", "audit", sys.argv[1]]
from webhook.app.cli import main
code = main()
from webhook.language import record
print(json.dumps({"code": code, "checked": len(calls), "fed": len(fed), "specs": len(specs),
                  "record_read": record._record.cache_info().misses, "modules": sorted(sys.modules)}))
"""


def _audit(tmp_path) -> dict:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD)
    env = dict(os.environ, AIADMIT_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("AIADMIT_NO_CACHE", None)
    run = subprocess.run([sys.executable, "-c", PROBE, str(manifest)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    *report, last = run.stdout.strip().splitlines()
    return dict(json.loads(last), report=report)


def test_a_one_file_audit_imports_only_what_it_uses(tmp_path):
    cold, warm = _audit(tmp_path), _audit(tmp_path)
    assert cold["code"] == warm["code"] == 1  # the GPU pod has findings
    for run in (cold, warm):
        assert [name for name in NOT_FOR_ONE_FILE if name in run["modules"]] == []


def test_a_one_file_audit_runs_no_cel_check_of_the_built_in_bundle(tmp_path):
    # Its checks are on record (policies/checked.json, language/celrecord.py), even on a first run with no cache.
    cold, warm = _audit(tmp_path), _audit(tmp_path)
    assert cold["checked"] == warm["checked"] == 0


def test_a_warm_run_imports_and_computes_nothing_its_kept_bundle_decided(tmp_path):
    cold, warm = _audit(tmp_path), _audit(tmp_path)
    assert warm["report"] == cold["report"] and any("shm-sized" in line for line in cold["report"])
    assert [name for name in NOT_FOR_A_WARM_RUN if name in warm["modules"]] == []
    assert warm["fed"] == warm["specs"] == 0  # the CEL code's digest and the kinds table came with the bundle
    assert "webhook.cel.parser" in cold["modules"] and cold["fed"] > 0 and cold["specs"] > 0  # a load computes them


def test_a_warm_run_reads_not_the_record_for_the_default_configs_schema_check(tmp_path):
    # The first run's answer for the default config (the record's) is kept in the disk cache, which is asked first.
    cold, warm = _audit(tmp_path), _audit(tmp_path)
    assert cold["record_read"] == 1 and warm["record_read"] == 0
    assert warm["report"] == cold["report"]
