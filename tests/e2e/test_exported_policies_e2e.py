"""The exported ValidatingAdmissionPolicies on the real 1.37 API server answer as the webhook (issue 23, "Done when").

`aiadmit export`'s policies and bindings (webhook/outputs/vap.py) are installed on the e2e kube-apiserver v1.37.2
with no webhook registered. Every object of the built-in bundle's policy tests and of the repository's corpus
(tests/data/corpus, the copy of ../shared/corpus) that an exported policy covers is created with a server-side dry
run three times, in three namespaces:

- `plain`, which no binding matches: the object as the API server stores it (defaulted, after the built-in
  mutating plugins), i.e. what the webhook is sent. The webhook's verdict is computed from it by the engine, as
  `aiadmit serve` computes it, keeping the findings of the exported rules only;
- `deny` (no enforcement label): the exported bindings at the policies' own actions. Denied exactly when the
  webhook denies for an exported rule, with one of the webhook's messages (the API server names the first
  denying validation only); the warn policies' failures come back as warnings, the webhook's words;
- `warn` (`aiadmit.dev/enforcement: warn`): every failing validation of every policy is a warning, so every
  message is compared, each validation's pieces (one per failing container) as a multiset.

Isolation: each binding gets one more namespace requirement (the label `aiadmit-e2e.dev/exported`), so the other
modules' deliberately non-compliant objects, created in their own namespaces, are never judged by these policies;
the bindings' own selectors are kept as exported. Everything is removed at the end of the module.

Params: the policies read their params through `paramRef` from `PolicyParams` objects (webhook/outputs/vapparams.py),
installed with their CRD. A second pass replaces only those objects with a config's non-default values and compares
again against the webhook loaded with that config; a third deletes one to show `parameterNotFoundAction: Deny`.

Batched: one API server for the whole session (conftest), one install, ~1,000 dry runs over a few connections.
"""

from __future__ import annotations

import collections
import copy
import glob
import http.client
import json
import re
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: serverproc

from serverproc import make_review  # noqa: E402
from webhook.engine.core import Engine  # noqa: E402
from webhook.inputs.review import resource_of  # noqa: E402
from webhook.inputs.sources import load_paths  # noqa: E402
from webhook.k8s.versions import REFERENCE  # noqa: E402
from webhook.model import patch  # noqa: E402
from webhook.model.facts import OfflineFacts  # noqa: E402
from webhook.model.resource import Resource  # noqa: E402
from webhook.outputs import vap, vapparams  # noqa: E402

pytestmark = pytest.mark.e2e

TESTS = Path(__file__).resolve().parent.parent
ISOLATION = "aiadmit-e2e.dev/exported"
ENFORCEMENT = "aiadmit.dev/enforcement"
TIER = "aiadmit.dev/tier"
TRUNCATED = 256  # the length of a warning the API server shortened
MODES = ("plain", "deny", "warn", "untrusted-deny", "untrusted-warn")
ADMIN = "aiadmit-e2e-admin"  # the control plane's admin client certificate's CN (conftest)
_WARNING = re.compile(r"Validation failed for ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)': (.*)",
                      re.S)
_DENIAL = re.compile(r"ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)' denied request: (.*)", re.S)


def _objects() -> list[dict]:
    """Every object of the bundle's policy tests and the corpus (as tests/test_export.py reads them)."""
    paths = sorted(glob.glob(str(TESTS / "policies" / "*" / "*.yaml")))
    paths = [p for p in paths if not p.endswith("test.yaml")]
    paths += sorted(glob.glob(str(TESTS / "data" / "corpus" / "**" / "*.yaml"), recursive=True))
    loaded = load_paths([p for p in paths if "_unparseable" not in p])
    return [(f"{r.origin.file}: {r.kind}/{r.name}", r.obj) for r in loaded.resources]


class Client:
    """Raw REST against the control plane as its admin, one HTTPS connection per thread (the warnings of a
    response are its `Warning` headers, which the generated client does not return)."""

    def __init__(self, apiserver):
        self.apiserver = apiserver
        self.local = threading.local()
        self.plurals: dict = {}
        self.lock = threading.Lock()

    def _conn(self):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.apiserver.host, self.apiserver.port,
                                               context=self.apiserver._ssl, timeout=60)
            self.local.conn = conn
        return conn

    def request(self, method: str, path: str, body=None) -> tuple[int, dict, list[str]]:
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                warnings = [_unquote(w) for w in resp.headers.get_all("Warning") or []]
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:  # a 404 of an unserved group version is plain text
                    body = {"message": raw.decode(errors="replace")}
                return resp.status, body, warnings
            except (http.client.HTTPException, ConnectionError):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def resource(self, api_version: str, kind: str):
        """(plural, namespaced) of a kind, from discovery; None when the API server does not serve it."""
        key = (api_version, kind)
        with self.lock:
            if key not in self.plurals:
                base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
                status, body, _ = self.request("GET", base)
                found = None
                if status == 200:
                    for r in body.get("resources", []):
                        if r.get("kind") == kind and "/" not in r["name"]:
                            found = (base, r["name"], r["namespaced"])
                self.plurals[key] = found
            return self.plurals[key]

    def dry_run_create(self, obj: dict, namespace: str) -> tuple[int, dict, list[str]]:
        base, plural, _ = self.resource(obj["apiVersion"], obj["kind"])
        return self.request("POST", f"{base}/namespaces/{namespace}/{plural}?dryRun=All&fieldValidation=Ignore",
                            obj)


def _unquote(header: str) -> str:
    """The text of an RFC 7234 warning header `299 - "text"` as the API server writes it (\\" and \\\\ escaped)."""
    match = re.match(r'^\d{3} \S+ "(.*)"$', header, re.S)
    text = match.group(1) if match else header
    return re.sub(r'\\(.)', r'\1', text)


def _prepared(obj: dict, namespace: str) -> dict:
    out = json.loads(json.dumps(obj))
    meta = out.setdefault("metadata", {})
    meta["namespace"] = namespace
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "selfLink"):
        meta.pop(key, None)
    out.pop("status", None)
    if not meta.get("name") and not meta.get("generateName"):
        meta["generateName"] = "obj-"
    return out


@pytest.fixture(scope="module")
def installed(apiserver, crds):
    """The exported policies and bindings on the API server, the three namespaces; removed afterwards."""
    engine = Engine.load()
    exported = [r for r in vap.export(engine.policies, engine.config, REFERENCE) if r.objects or r.mutating]
    docs = []
    for result in exported:
        for obj in result.objects + result.mutating:
            obj = json.loads(json.dumps(obj))
            if obj["kind"].endswith("AdmissionPolicyBinding"):
                obj["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"].append(
                    {"key": ISOLATION, "operator": "Exists"})
            docs.append(obj)
    params = [o for r in exported for o in r.params]
    _install_param_kind(apiserver, vapparams.crd([r.policy for r in exported if r.params]))
    suffix = uuid.uuid4().hex[:6]
    namespaces = {mode: f"vap-{mode}-{suffix}" for mode in MODES}
    labels = {"plain": {}, "deny": {ISOLATION: "yes"}, "warn": {ISOLATION: "yes", ENFORCEMENT: "warn"},
              "untrusted-deny": {ISOLATION: "yes", TIER: "untrusted"},
              "untrusted-warn": {ISOLATION: "yes", TIER: "untrusted", ENFORCEMENT: "warn"}}
    ns_docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespaces[k], "labels": labels[k]}}
               for k in namespaces]
    apiserver.kubectl("apply", "--server-side", "--field-manager=aiadmit-e2e", "-f", "-",
                      input=yaml.safe_dump_all(ns_docs + params + docs))
    try:
        vap_of = {(d["metadata"]["annotations"]["aiadmit.dev/policy"], rule): d["metadata"]["name"]
                  for d in docs if d["kind"] == "ValidatingAdmissionPolicy"
                  for rule in d["metadata"]["annotations"]["aiadmit.dev/rules"].split(",")}
        yield {"engine": engine, "exported": exported, "docs": docs, "namespaces": namespaces,
               "ns_docs": ns_docs, "vap_of": vap_of, "params": params}
    finally:
        apiserver.kubectl("delete", "policyparams", *[o["metadata"]["name"] for o in params], "--ignore-not-found",
                          check=False)
        names = [d["metadata"]["name"] for d in docs]
        for kind in ("validatingadmissionpolicybindings", "validatingadmissionpolicies",
                     "mutatingadmissionpolicybindings", "mutatingadmissionpolicies"):
            apiserver.kubectl("delete", kind, *[n for d, n in zip(docs, names) if d["kind"].lower() + "s" == kind],
                              "--ignore-not-found", check=False)


def _install_param_kind(apiserver, crd: dict) -> None:
    """The PolicyParams CRD, applied and waited for until its kind is in discovery (kubectl needs discovery)."""
    apiserver.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=aiadmit-e2e", "-f", "-",
                      input=yaml.safe_dump(crd))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, body = apiserver.get(f"/apis/{vapparams.GROUP}/{vapparams.VERSION}")
        if status == 200 and vapparams.PLURAL in {r["name"] for r in json.loads(body).get("resources", [])}:
            return
        time.sleep(0.5)
    pytest.fail("the PolicyParams CRD is not in discovery after 120 s", pytrace=False)


@pytest.fixture(scope="module")
def status_controller(apiserver, tmp_path_factory):
    """kube-controller-manager v1.37.2 (tests/e2e/node's build) running only the controller that type-checks
    ValidatingAdmissionPolicies and writes `status.typeChecking`: the API server does not, and the e2e control plane
    has no controller-manager of its own. Skips, saying so, when that build is not cached."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from install.prereqs import node_bin

    binaries = node_bin()
    if binaries is None:
        pytest.skip("kube-controller-manager is not built (tests/e2e/node/build.sh, warmed by ci-prepare.sh): the "
                    "type-check status of a ValidatingAdmissionPolicy is written by its "
                    "validatingadmissionpolicy-status-controller")
    log = tmp_path_factory.mktemp("status-controller") / "kube-controller-manager.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen([str(binaries / "kube-controller-manager"), f"--kubeconfig={apiserver.kubeconfig}",
                                 "--controllers=validatingadmissionpolicy-status-controller", "--leader-elect=false",
                                 "--secure-port=0", "--use-service-account-credentials=false", "--v=1"],
                                stdout=sink, stderr=subprocess.STDOUT)
    try:
        yield log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


def _statuses(apiserver, docs) -> dict:
    items = apiserver.get_json("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies")["items"]
    wanted = {d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    return {i["metadata"]["name"]: i for i in items if i["metadata"]["name"] in wanted}


def test_every_exported_policy_is_accepted_with_a_clean_type_check(apiserver, installed, status_controller):
    docs = installed["docs"]
    wanted = {d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    assert len(wanted) >= 4, wanted
    deadline = time.monotonic() + 120
    while True:
        found = _statuses(apiserver, docs)
        checked = {n: p for n, p in found.items()
                   if (p.get("status") or {}).get("observedGeneration") == p["metadata"]["generation"]}
        if set(checked) == wanted or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(checked) == wanted, (f"not type-checked in 120 s: {sorted(wanted - set(checked))}",
                                    status_controller.read_text()[-3000:])
    for name, policy in sorted(checked.items()):
        status = policy["status"]
        assert not (status.get("typeChecking") or {}).get("expressionWarnings"), (name, status["typeChecking"])
        assert not [c for c in status.get("conditions") or [] if c.get("status") == "False"], (name, status)
    bindings = apiserver.get_json("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings")
    got = {b["metadata"]["name"] for b in bindings["items"]}
    assert {d["metadata"]["name"] for d in docs if d["kind"].endswith("Binding")} <= got


def _mutated(installed, stored: dict, namespace: str) -> dict:
    """`stored` as the mutating webhook patches it, with the operations of the exported mutations only (the policies
    whose mutations are exported export all of them)."""
    engine = installed["engine"]
    review = make_review(copy.deepcopy(stored), username=ADMIN, namespace=namespace)["request"]
    resource = resource_of(review, "object")
    mutation = engine.mutate(resource, _facts(installed))
    assert not mutation.errors, mutation.errors
    out = copy.deepcopy(stored)
    for result in installed["exported"]:
        if result.mutations and (resource.kind, resource.group) in result.kinds_mutated:
            for operation in mutation.by_policy.get(result.policy.id, ()):
                patch.apply(out, operation)
    return out


def _facts(installed):
    return OfflineFacts([Resource(d) for d in installed["ns_docs"]])


def _expected(installed, stored: dict, namespace: str) -> dict:
    """What the webhook says of `stored` for the exported rules: {VAP name: (action, {rule: [messages]})}."""
    engine = installed["engine"]
    review = make_review(stored, username=ADMIN, namespace=namespace)["request"]
    resource = resource_of(review, "object")
    evaluation = engine.evaluate(resource, _facts(installed))
    assert not evaluation.errors, evaluation.errors
    vap_of = installed["vap_of"]
    out: dict = {}
    for result in installed["exported"]:
        if (resource.kind, resource.group) not in result.kinds:
            continue
        for finding in evaluation.findings:
            if finding.policy == result.policy.id and finding.rule in result.rules \
                    and finding.result in ("fail", "error"):
                entry = out.setdefault(vap_of[(finding.policy, finding.rule)], [finding.action, {}])
                assert entry[0] == finding.action, (finding, entry)
                entry[1].setdefault(finding.rule, []).append(" ".join(f"{finding.policy}: {finding.message}".split()))
    return out


def _pieces(messages) -> collections.Counter:
    """A validation's message split at "; " (one piece per failing container), as a multiset."""
    return collections.Counter(p for m in messages for p in m.split("; "))


def test_dry_runs_under_the_exported_policies_answer_as_the_webhook(apiserver, installed):
    compared, denials, warned_pieces, mutated = _compare(apiserver, installed)
    assert compared >= 200 and denials >= 20 and warned_pieces >= 50, (compared, denials, warned_pieces)
    assert mutated >= 20, mutated
    installed["denials"] = denials


# Non-default params (as tests/test_export.py): `all` exposes no device (devices-declared), and no annotation asks
# for a GPU fraction (untrusted-gpu-isolation).
NON_DEFAULT = """apiVersion: aiadmit.dev/v1alpha1
kind: Config
policies:
  devices-declared:
    params: {noDeviceValues: ["", void, none, all]}
  untrusted-gpu-isolation:
    params: {sharingAnnotations: []}
"""
# denied by devices-declared `visible-devices-env` under the default params, allowed under NON_DEFAULT's
_ALL_DEVICES = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "all-devices-"},
                "spec": {"containers": [{"name": "main", "image": "busybox@sha256:" + "0" * 64,
                                         "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
                                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi",
                                                                    "ephemeral-storage": "1Gi"},
                                                       "limits": {"memory": "64Mi"}}}]}}


def _answer_until(client, namespace: str, obj: dict, allowed: bool, timeout: float = 90) -> tuple:
    """Dry-run create `obj` until the API server allows it (or denies it), as its param informer catches up."""
    deadline = time.monotonic() + timeout
    while True:
        status, body, _ = client.dry_run_create(_prepared(obj, namespace), namespace)
        if (status in (200, 201)) == allowed or time.monotonic() > deadline:
            return status, body
        time.sleep(0.5)


def test_a_config_change_is_only_a_param_object_change_and_the_answers_still_agree(apiserver, installed, tmp_path):
    client = Client(apiserver)
    deny = installed["namespaces"]["deny"]
    status, body = _answer_until(client, deny, _ALL_DEVICES, allowed=False)
    assert status == 403 and "aiadmit-devices-declared" in body.get("message", ""), (status, body)
    config = tmp_path / "config.yaml"
    config.write_text(NON_DEFAULT)
    engine = Engine.load(config_path=str(config))
    exported = [r for r in vap.export(engine.policies, engine.config, REFERENCE) if r.objects or r.mutating]
    for mine, theirs in zip(exported, installed["exported"]):  # the policies and bindings are the same objects
        assert (mine.objects, mine.mutating) == (theirs.objects, theirs.mutating), mine.policy.id
    params = [o for r in exported for o in r.params]
    assert params != installed["params"]
    try:
        apiserver.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=aiadmit-e2e", "-f", "-",
                          input=yaml.safe_dump_all(params))
        status, body = _answer_until(client, deny, _ALL_DEVICES, allowed=True)
        assert status in (200, 201), (status, body)  # the new value holds, nothing else was changed
        compared, denials, _, _ = _compare(apiserver, dict(installed, engine=engine, exported=exported))
        assert compared >= 200 and denials < installed.get("denials", denials + 1), (compared, denials)
        # parameterNotFoundAction Deny: without its param object a deny policy denies (failurePolicy Fail)
        # (the API server answers 422 Invalid for it, naming the policy and binding: not the validations' 403)
        apiserver.kubectl("delete", "policyparams", vapparams.name("devices-declared"))
        status, body = _answer_until(client, deny, _ALL_DEVICES, allowed=False)
        print(f"\nwithout its param object: {status} {body.get('message')}")
        assert status == 422 and "aiadmit-devices-declared" in body.get("message", ""), (status, body)
        assert "no params found" in body.get("message", ""), body
    finally:
        apiserver.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=aiadmit-e2e", "-f", "-",
                          input=yaml.safe_dump_all(installed["params"]))


def test_the_param_kind_refuses_a_mistyped_value(apiserver, installed):
    wrong = copy.deepcopy(installed["params"][0])
    wrong["metadata"] = {"name": "aiadmit-e2e-mistyped"}
    wrong["spec"] = {"visibleDevicesEnv": "NVIDIA_VISIBLE_DEVICES"}  # a string where the policy has a list
    done = apiserver.kubectl("create", "-f", "-", input=yaml.safe_dump(wrong), check=False)
    assert done.returncode != 0 and "visibleDevicesEnv" in done.stderr, done.stderr


def _compare(apiserver, installed) -> tuple:
    """(compared, denials, warned pieces, mutated): every covered object dry-run in each namespace against the
    webhook's answer from `installed["engine"]`; asserts there is no difference."""
    client = Client(apiserver)
    namespaces = installed["namespaces"]
    covered = {k for r in installed["exported"] for k in r.kinds}
    candidates = []
    for where, obj in _objects():
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
        if not isinstance(api_version, str) or (kind, group) not in covered:
            continue
        found = client.resource(api_version, kind)
        if found is None or not found[2]:  # not served (a CRD version the install lacks) or cluster-scoped
            continue
        candidates.append((where, obj))

    def run(item):
        where, obj = item
        status, stored, _ = client.dry_run_create(_prepared(obj, namespaces["plain"]), namespaces["plain"])
        if status not in (200, 201):
            return where, None  # the API server's own validation refuses it: no admission to compare
        answers = {mode: client.dry_run_create(_prepared(obj, namespaces[mode]), namespaces[mode])
                   for mode in MODES[1:]}
        return where, (stored, answers)

    _wait_until_enforced(client, installed, candidates)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(run, candidates))
    compared, refused, denials, warned_pieces, mutated = 0, 0, 0, 0, 0
    problems = []
    for where, result in results:
        if result is None:
            refused += 1
            continue
        stored, answers = result
        compared += 1
        for mode in MODES[1:]:
            webhook_patched = _mutated(installed, stored, namespaces[mode])
            expected = _expected(installed, webhook_patched, namespaces[mode])
            status, body, warnings = answers[mode]
            if status in (200, 201):  # the object after the MutatingAdmissionPolicies: the webhook's patch
                if webhook_patched != stored:
                    mutated += 1
                if _content(body) != _content(webhook_patched):
                    problems.append((where, mode, "mutated otherwise", _content(body), _content(webhook_patched)))
            denying = {p: rules for p, (action, rules) in expected.items() if action == "deny"}
            if denying:  # the API server names the first denying validation only: one of the webhook's
                denials += 1
                match = _DENIAL.search(body.get("message", "")) if status == 403 else None
                if match is None:
                    problems.append((where, mode, "not denied", status, body.get("message"), sorted(denying)))
                elif _pieces([match.group(3)]) not in [_pieces(m) for m in denying.get(match.group(1), {}).values()]:
                    problems.append((where, mode, "another message", match.group(1), match.group(3), denying))
            elif status not in (200, 201):
                problems.append((where, mode, "denied", status, body.get("message")))
            problems += _compare_warnings(where, mode, warnings, expected, only="warn")
            if mode.endswith("warn"):
                warned_pieces += sum(len(m) for _, rules in expected.values() for m in rules.values())
    print(f"\n{len(candidates)} objects of exported kinds: {compared} compared, {refused} refused by the API "
          f"server's own validation; {denials} denials; {warned_pieces} failing-container messages compared; "
          f"{mutated} objects mutated, as the webhook patches them")
    kinds = collections.Counter((mode, what) for _, mode, what, *_ in problems)
    assert not problems, (kinds, problems[:5])
    return compared, denials, warned_pieces, mutated


def _content(obj: dict) -> dict:
    """The object without what the API server assigns on create (uid, timestamps, a generated name, and where they
    are copied: a Job's selector and template labels carry its uid)."""
    text = json.dumps(obj)
    meta = obj.get("metadata", {})
    for key in ("uid", "name"):
        if meta.get(key):
            text = text.replace(json.dumps(meta[key])[1:-1], f"<{key}>")
    out = json.loads(text)
    meta = out.get("metadata", {})
    for key in ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields", "name", "namespace"):
        meta.pop(key, None)
    out.pop("status", None)
    return out


def _wait_until_enforced(client, installed, candidates, timeout: float = 90) -> None:
    """Wait until the API server's admission plugins hold every exported policy and binding: they load them from
    their own watch, some time after the objects are created (and type-checked). For each namespace and exported
    policy, one object the webhook says it decides (alone, where it denies) is created (dry run) until the answer
    names that policy; for the MutatingAdmissionPolicies, until a mutated object comes back."""
    namespaces = installed["namespaces"]
    probes = {}  # (mode, VAP name) -> object; (mode, "MAP") -> (object, its content as the webhook patches it)
    names = [d["metadata"]["name"] for d in installed["docs"] if d["kind"] == "ValidatingAdmissionPolicy"]
    for _, obj in candidates:
        status, stored, _ = client.dry_run_create(_prepared(obj, namespaces["plain"]), namespaces["plain"])
        if status not in (200, 201):
            continue
        for mode in MODES[1:]:
            patched = _mutated(installed, stored, namespaces[mode])
            expected = _expected(installed, patched, namespaces[mode])
            denying = [p for p, (action, _) in expected.items() if action == "deny"]
            for name, (action, _) in expected.items():
                if action == "warn" or denying == [name]:
                    probes.setdefault((mode, name), obj)
            if patched != stored and not denying:
                probes.setdefault((mode, "MAP"), (obj, _content(patched)))
        if len(probes) >= (len(names) + 1) * (len(MODES) - 1):
            break
    pending = dict(probes)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for (mode, name), obj in list(pending.items()):
            obj, patched = obj if name == "MAP" else (obj, None)
            status, body, warnings = client.dry_run_create(_prepared(obj, namespaces[mode]), namespaces[mode])
            if name == "MAP":
                seen = status in (200, 201) and _content(body) == patched
            else:
                named = [m.group(1) for m in map(_WARNING.match, warnings) if m]
                denial = _DENIAL.search(body.get("message", "")) if status == 403 else None
                seen = name in named or (denial is not None and denial.group(1) == name)
            if seen:
                del pending[(mode, name)]
        if pending:
            time.sleep(0.5)
    print(f"\n{len(probes)} probes of the policies' enforcement; not enforced after {timeout:.0f} s: {sorted(pending)}")


def _compare_warnings(where, mode, warnings, expected, only):
    """The VAP warnings of the response against the webhook's failures at action `only`."""
    got: dict = {}
    for text in warnings:
        match = _WARNING.match(text)
        if match is None:
            continue  # the API server's own warnings (deprecated fields, ...) are not the policies'
        got.setdefault(match.group(1), []).append(match.group(3))
    want = {p: [m for ms in rules.values() for m in ms] for p, (action, rules) in expected.items() if action == only}
    if any(len(text) == TRUNCATED for text in warnings):
        # Over 4,096 characters of warnings the API server cuts each to 256 and drops what no longer fits
        # (k8s.io/apiserver endpoints/filters/warning.go): each one left must begin as one of the webhook's.
        cut = [(p, m) for p, ms in got.items() for m in ms
               if not any(w.startswith(m.split("; ")[0]) for w in want.get(p, ()))]
        return [(where, mode, "truncated warnings differ", cut, want)] if cut else []
    if {p: _pieces(m) for p, m in got.items()} != {p: _pieces(m) for p, m in want.items()}:
        return [(where, mode, "warnings differ", got, want)]
    return []
