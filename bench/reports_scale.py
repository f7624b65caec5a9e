"""Scale benchmark of `aiadmit reports-controller` on the end-to-end API server (a benchmark, not a test).

    flock /tmp/aiadmit-heavy.lock python bench/reports_scale.py --pods 10000 --namespaces 200

Starts etcd + kube-apiserver v1.37.2 the way tests/e2e does (tests/e2e/conftest.py's ControlPlane: etcd with
--unsafe-no-fsync, no scheduler, kubelet or controller-manager, so pods with no nodeName stay Pending), installs the
PolicyReport CRDs, and creates, per namespace, with a threaded bulk creator over keep-alive HTTPS connections:
two Deployments (one asking for a GPU with no requests: violating), a ReplicaSet and its pods under each, one Job
with its pods, and one standalone pod; the pods add up to --pods. Owner references are set as the controllers would
set them (controller: true), so the owned ReplicaSets and pods are the Deployments' and Jobs' (audit --cluster's rule).

Then it measures:
- start -> every report written: from starting the controller process to its aiadmit_reports_synced gauge being 1;
- a change -> its report: a new violating Deployment in each of --changes namespaces, one at a time, to the moment
  its namespace's PolicyReport holds a failing result for it (polled every 50 ms);
- the controller's RSS (VmHWM, the peak, and VmRSS at the end) from /proc;
- list and watch requests the API server counted (apiserver_request_total, by verb and resource) during the start
  and during the steady state that follows (the changes), from its /metrics;
- a PolicyException -> its report: in each of --exceptions namespaces, one at a time, an exception (aiadmit.dev
  PolicyException, the CRDs of manifests/base installed, so the controller watches them) lifting the policies the
  violating Deployment fails, to the moment that namespace's report has no failing result for it; and the list
  requests each exception cost the API server (the controller reads only that namespace's Deployments again);
and verifies: one report per namespace, none missing, and every expected object (Deployments, Jobs, standalone
pods) named by exactly one result per policy that applied to it, no owned object and no object twice.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from conftest import ControlPlane, ensure_binaries  # noqa: E402

GPU = {"name": "main", "image": "registry.example/serve:v1", "resources": {"limits": {"nvidia.com/gpu": 1}}}
PLAIN = {"name": "main", "image": "registry.example/app@sha256:" + "a" * 64,
         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}}}


def uid(*parts) -> str:
    import hashlib

    h = hashlib.md5("/".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def owner(kind, api, name, ref_uid):
    return [{"apiVersion": api, "kind": kind, "name": name, "uid": ref_uid, "controller": True}]


def plan(namespaces: int, pods: int):
    """(namespace objects, [(path, body)] in creation order, expected audited (kind, ns, name))."""
    per_ns = max(pods // namespaces, 4)
    work, expected = [], set()
    for n in range(namespaces):
        ns = f"bench-{n:05d}"
        work.append(("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        rest = per_ns - 1  # one standalone pod
        split = [rest * 2 // 5, rest * 2 // 5, rest - 2 * (rest * 2 // 5)]  # deploy a, deploy b, job
        for d, count in enumerate(split[:2]):
            name = f"app-{d}"
            container = GPU if d == 0 else PLAIN
            labels = {"app": name}
            tmpl = {"metadata": {"labels": labels}, "spec": {"containers": [container]}}
            work.append((f"/apis/apps/v1/namespaces/{ns}/deployments",
                         {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                          "spec": {"replicas": count, "selector": {"matchLabels": labels}, "template": tmpl}}))
            expected.add(("Deployment", ns, name))
            rs = f"{name}-5d8f7"
            work.append((f"/apis/apps/v1/namespaces/{ns}/replicasets",
                         {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                          "metadata": {"name": rs, "namespace": ns,
                                       "ownerReferences": owner("Deployment", "apps/v1", name, uid(ns, name))},
                          "spec": {"replicas": count, "selector": {"matchLabels": labels}, "template": tmpl}}))
            for p in range(count):
                work.append((f"/api/v1/namespaces/{ns}/pods",
                             {"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": f"{rs}-{p:05d}", "namespace": ns, "labels": labels,
                                           "ownerReferences": owner("ReplicaSet", "apps/v1", rs, uid(ns, rs))},
                              "spec": {"containers": [container]}}))
        job = {"metadata": {"labels": {"job": "train"}},
               "spec": {"restartPolicy": "Never", "containers": [PLAIN]}}
        work.append((f"/apis/batch/v1/namespaces/{ns}/jobs",
                     {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": ns},
                      "spec": {"parallelism": split[2], "completions": split[2], "template": job}}))
        expected.add(("Job", ns, "train"))
        for p in range(split[2]):
            work.append((f"/api/v1/namespaces/{ns}/pods",
                         {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": f"train-{p:05d}", "namespace": ns, "labels": {"job": "train"},
                                       "ownerReferences": owner("Job", "batch/v1", "train", uid(ns, "train"))},
                          "spec": {"restartPolicy": "Never", "containers": [PLAIN]}}))
        work.append((f"/api/v1/namespaces/{ns}/pods", {"apiVersion": "v1", "kind": "Pod",
                                                      "metadata": {"name": "standalone", "namespace": ns},
                                                      "spec": {"containers": [PLAIN]}}))
        expected.add(("Pod", ns, "standalone"))
    return work, expected, per_ns * namespaces


def bulk_create(cp: ControlPlane, items: list, threads: int = 12) -> None:
    """POST every item; namespaces first (all of them), then the rest, spread over keep-alive connections."""
    namespaces = [i for i in items if i[1]["kind"] == "Namespace"]
    rest = [i for i in items if i[1]["kind"] != "Namespace"]
    errors = []

    def worker(chunk):
        conn = http.client.HTTPSConnection(cp.host, cp.port, context=cp._ssl, timeout=60)
        for path, body in chunk:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            if response.status not in (201, 409):
                errors.append(f"{path}: {response.status} {data[:200]!r}")
        conn.close()

    for batch in (namespaces, rest):
        pool = [threading.Thread(target=worker, args=(batch[k::threads],)) for k in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    if errors:
        raise SystemExit(f"{len(errors)} creations failed, first: {errors[0]}")


def request_counts(cp: ControlPlane) -> Counter:
    status, body = cp.get("/metrics", timeout=60)
    counts = Counter()
    for line in body.decode().splitlines():
        # apiserver_request_total counts a watch when it ends; apiserver_longrunning_requests is those still open
        for metric, tag in (("apiserver_request_total{", ""), ("apiserver_longrunning_requests{", " (open)")):
            if line.startswith(metric):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
                if labels.get("verb") in ("LIST", "WATCH"):
                    counts[(labels["verb"] + tag, labels.get("resource", ""))] += float(line.rsplit(" ", 1)[1])
    return counts


def diff(after: Counter, before: Counter) -> dict:
    return {f"{verb} {res}": int(after[k] - before[k]) for k in sorted(after) for verb, res in [k]
            if after[k] - before[k] != 0}


def metrics(port: int) -> dict:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(aiadmit_reports_[^\s]+) (\S+)$", text, re.M)}


def rss(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    return {k: int(m.group(1)) // 1024 for k in ("VmHWM", "VmRSS") for m in [re.search(rf"{k}:\s+(\d+)", status)] if m}


def all_reports(cp: ControlPlane) -> list:
    out, token = [], ""
    while True:
        path = "/apis/wgpolicyk8s.io/v1alpha2/policyreports?limit=200" + (f"&continue={token}" if token else "")
        page = cp.get_json(path)
        out += page["items"]
        token = page["metadata"].get("continue")
        if not token:
            return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--namespaces", type=int, default=200)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--exceptions", type=int, default=5)
    args = parser.parse_args()
    work_dir = Path(tempfile.mkdtemp(prefix="aiadmit-reports-bench-"))
    bin_dir = ensure_binaries(work_dir / "build.log")
    cp = ControlPlane(bin_dir, work_dir)
    cp.start()
    cp.kubectl("apply", "-f", str(ROOT / "tests" / "data" / "wgpolicyk8s-policyreport-crds.yaml"))
    cp.kubectl("wait", "--for=condition=Established", "crd/policyreports.wgpolicyk8s.io", "--timeout=60s")
    cp.kubectl("apply", "-f", str(ROOT / "manifests" / "base" / "crds.yaml"))
    cp.kubectl("wait", "--for=condition=Established", "crd/policyexceptions.aiadmit.dev", "--timeout=60s")
    items, expected, pods = plan(args.namespaces, args.pods)
    started = time.monotonic()
    bulk_create(cp, items)
    created = time.monotonic() - started
    print(f"created {len(items)} objects ({pods} pods, {args.namespaces} namespaces) in {created:.1f}s "
          f"({len(items) / created:.0f}/s)", flush=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    before = request_counts(cp)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    log = open(work_dir / "controller.log", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "reports-controller", "--kubeconfig", str(cp.kubeconfig),
                             "--metrics-port", str(port), "--metrics-address", "127.0.0.1"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
    peak = 0
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"controller exited {proc.returncode}; see {work_dir / 'controller.log'}")
        try:
            if metrics(port).get("aiadmit_reports_synced") == 1:
                break
        except OSError:
            pass
        if proc.poll() is None:
            peak = max(peak, rss(proc.pid).get("VmRSS", 0))
        time.sleep(0.2)
    to_sync = time.monotonic() - t0
    at_sync = request_counts(cp)
    memory_sync = rss(proc.pid)
    print(f"start -> every report written: {to_sync:.1f}s; RSS {memory_sync}", flush=True)
    # verify
    reports = all_reports(cp)
    by_ns = Counter(r["metadata"]["namespace"] for r in reports)
    missing = [f"bench-{n:05d}" for n in range(args.namespaces) if by_ns[f"bench-{n:05d}"] == 0]
    seen = Counter()
    for report in reports:
        if not report["metadata"]["namespace"].startswith("bench-"):
            continue
        for result in report.get("results") or ():
            ref = result["resources"][0]
            seen[(ref["kind"], ref["namespace"], ref["name"], result["policy"], result.get("rule"),
                  result["result"], result.get("properties", {}).get("path"))] += 1
    objects = {(k, ns, name) for k, ns, name, *_ in seen}
    twice = [k for k, c in seen.items() if c > 1]
    print(f"verify: {len(reports)} reports for {args.namespaces} namespaces, missing {len(missing)}; "
          f"{len(objects)} objects in results, expected {len(expected)}, unexpected {len(objects - expected)}, "
          f"absent {len(expected - objects)}, results counted twice {len(twice)}", flush=True)
    # changes
    latencies = []
    for k in range(args.changes):
        ns = f"bench-{(k * 37) % args.namespaces:05d}"
        body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"late-{k}", "namespace": ns},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "late"}},
                         "template": {"metadata": {"labels": {"app": "late"}}, "spec": {"containers": [GPU]}}}}
        conn = http.client.HTTPSConnection(cp.host, cp.port, context=cp._ssl, timeout=30)
        t = time.monotonic()
        conn.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", json.dumps(body),
                     {"Content-Type": "application/json"})
        assert conn.getresponse().status == 201
        while True:
            status, data = cp.get(f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{ns}/policyreports/aiadmit-{ns}")
            if status == 200 and f'"name":"late-{k}"' in data.decode().replace(" ", ""):
                break
            if time.monotonic() - t > 120:
                raise SystemExit(f"no report change for {ns}/late-{k} within 120s")
            time.sleep(0.05)
        latencies.append(time.monotonic() - t)
        conn.close()
    steady = request_counts(cp)
    lifted, lifted_lists = [], []
    for k in range(args.exceptions):
        ns = f"bench-{(k * 53 + 11) % args.namespaces:05d}"
        report = cp.get_json(f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{ns}/policyreports/aiadmit-{ns}")
        failing = sorted({r["policy"] for r in report.get("results") or ()
                          if r["result"] == "fail" and r["resources"][0]["name"] == "app-0"})
        assert failing, f"{ns}/app-0 fails nothing"
        body = {"apiVersion": "aiadmit.dev/v1alpha1", "kind": "PolicyException",
                "metadata": {"name": "app-0", "namespace": ns},
                "spec": {"policies": failing[:64], "match": {"names": ["app-0"], "kinds": ["Deployment"]},
                         "reason": "benchmark", "requestedBy": "bench"}}
        counts = request_counts(cp)
        conn = http.client.HTTPSConnection(cp.host, cp.port, context=cp._ssl, timeout=30)
        t = time.monotonic()
        conn.request("POST", f"/apis/aiadmit.dev/v1alpha1/namespaces/{ns}/policyexceptions", json.dumps(body),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 201, response.read()[:300]
        while True:
            status, data = cp.get(f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{ns}/policyreports/aiadmit-{ns}")
            results = json.loads(data).get("results") or () if status == 200 else ()
            if status == 200 and not [r for r in results if r["result"] == "fail"
                                      and r["resources"][0]["name"] == "app-0"]:
                break
            if time.monotonic() - t > 120:
                raise SystemExit(f"{ns}/app-0 still failing 120s after its exception")
            time.sleep(0.05)
        lifted.append(time.monotonic() - t)
        conn.close()
        time.sleep(1.5)  # the controller's own lists for this exception are done (they preceded the write)
        lifted_lists.append({k: v for k, v in diff(request_counts(cp), counts).items() if k.startswith("LIST ")})
    memory_end = rss(proc.pid)
    final = metrics(port)
    proc.terminate()
    proc.wait(30)
    latencies.sort()
    print(f"change -> report ({args.changes} Deployments): median {latencies[len(latencies) // 2]:.2f}s, "
          f"max {latencies[-1]:.2f}s", flush=True)
    if lifted:
        lifted.sort()
        print(f"PolicyException -> report ({args.exceptions} namespaces): median {lifted[len(lifted) // 2]:.2f}s, "
              f"max {lifted[-1]:.2f}s; LIST requests each caused: {lifted_lists}", flush=True)
    print(f"controller RSS: peak (VmHWM) {memory_end['VmHWM']} MiB, at end {memory_end['VmRSS']} MiB", flush=True)
    print(f"API requests during start: {diff(at_sync, before)}", flush=True)
    print(f"API requests during steady state (the changes): {diff(steady, at_sync)}", flush=True)
    print("controller metrics: " + ", ".join(f"{k}={v:g}" for k, v in sorted(final.items())
                                              if not k.endswith(("_bucket", "_created"))), flush=True)
    cp.stop()
    ok = not missing and not twice and objects == expected
    print("OK" if ok else "FAILED verification")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
