"""Writes one namespace's reports and deletes the ones it no longer needs, knowing what it wrote before.

`--apply-reports` GETs each report and lists the old ones on every run; a
controller that writes a namespace many times a day keeps, per namespace, the
names and resourceVersions it wrote (read once at start from one paginated,
label-selected list), so a steady-state write is one PUT (one POST for a new
report, one DELETE for a report a shrunk namespace no longer fills). A 409
(someone else wrote it) costs one GET and a retry.
"""

from __future__ import annotations

import json
import time
from typing import Optional

from webhook.app.clusteraudit import MANAGED_SELECTOR, REPORT_APIS
from webhook.outputs.reports import openreports, policyreport
from webhook.outputs.reports.jsonreport import Encoded, dump


class ReportWriter:
    def __init__(self, api, api_version: str = policyreport.API_VERSION,
                 max_bytes: int = policyreport.DEFAULT_MAX_BYTES, max_reports: int = policyreport.DEFAULT_MAX_REPORTS):
        if api_version not in REPORT_APIS:
            raise ValueError(f"unknown report API {api_version}")
        self.api = api
        self.api_version = api_version
        self.group, self.version = api_version.split("/")
        self.plurals = REPORT_APIS[api_version]
        self.max_bytes, self.max_reports = max_bytes, max_reports
        self.known: dict[Optional[str], dict[str, str]] = {}  # namespace -> report name -> resourceVersion
        self.writes = 0

    def _path(self, namespace: Optional[str], name: str = "") -> str:
        plural = self.plurals[0] if namespace else self.plurals[1]
        scope = f"/namespaces/{namespace}" if namespace else ""
        return f"/apis/{self.group}/{self.version}{scope}/{plural}" + (f"/{name}" if name else "")

    def _call(self, method: str, path: str, body: Optional[bytes] = None, query=None):
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        method, url, headers, _, _ = self.api.param_serialize(method, path, query_params=query or [],
                                                              header_params=headers, auth_settings=["BearerToken"])
        response = self.api.rest_client.pool_manager.request(method, url, headers=headers, body=body,
                                                             timeout=30.0, retries=False)
        data = json.loads(response.data) if response.data else {}
        return response.status, data

    def load_existing(self) -> None:
        """What aiadmit wrote before (a previous controller or `--apply-reports`), one paginated list per plural."""
        for plural in self.plurals:
            token = None
            while True:
                query = [("labelSelector", MANAGED_SELECTOR), ("limit", 500)] + ([("continue", token)] if token else [])
                status, page = self._call("GET", f"/apis/{self.group}/{self.version}/{plural}", query=query)
                for _wait in range(60):  # 429 "storage is (re)initializing" right after a CRD is established
                    if status != 429 and status < 500:
                        break
                    time.sleep(1.0)
                    status, page = self._call("GET", f"/apis/{self.group}/{self.version}/{plural}", query=query)
                if status == 404:
                    break  # the CRD is not installed: the first write will say so
                if status != 200:
                    raise OSError(f"listing {plural}: {status} {page.get('message')}")
                for item in page.get("items") or ():
                    meta = item["metadata"]
                    self.known.setdefault(meta.get("namespace"), {})[meta["name"]] = meta["resourceVersion"]
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break

    def reports(self, namespace: Optional[str], results: list[tuple[str, str]]) -> list[tuple[dict, list[str]]]:
        packed = policyreport.pack_namespace(namespace, results, self.max_bytes, self.max_reports) if results else []
        if self.api_version == openreports.API_VERSION:
            packed = [(openreports._envelope(report), texts) for report, texts in packed]
        return packed

    def write(self, namespace: Optional[str], results: list[tuple[str, str]]) -> list[str]:
        """Make the namespace's reports these results; problems (one line each), empty when all is written."""
        problems = []
        known = self.known.setdefault(namespace, {})
        wanted = set()
        for report, texts in self.reports(namespace, results):
            name = report["metadata"]["name"]
            wanted.add(name)
            problem = self._put(namespace, name, report, texts, known)
            if problem:
                problems.append(problem)
        for name in sorted(set(known) - wanted):
            status, data = self._call("DELETE", self._path(namespace, name))
            if status in (200, 202, 404):
                known.pop(name, None)
                self.writes += 1
            else:
                problems.append(f"deleting {namespace}/{name}: {status} {data.get('message')}")
        if not known:
            self.known.pop(namespace, None)
        return problems

    def _put(self, namespace, name, report, texts, known) -> Optional[str]:
        for _attempt in range(3):
            version = known.get(name)
            metadata = dict(report["metadata"], **({"resourceVersion": version} if version else {}))
            body = dump(dict(report, metadata=metadata, results=Encoded(texts))).encode()
            if version:
                status, data = self._call("PUT", self._path(namespace, name), body)
            else:
                status, data = self._call("POST", self._path(namespace), body)
            if status in (200, 201):
                known[name] = data["metadata"]["resourceVersion"]
                self.writes += 1
                return None
            if status == 409 or (status == 404 and version):  # changed or deleted by someone else: read, retry
                current_status, current = self._call("GET", self._path(namespace, name))
                if current_status == 200:
                    known[name] = current["metadata"]["resourceVersion"]
                else:
                    known.pop(name, None)
                continue
            hint = " (is the report CRD installed?)" if status == 404 else ""
            return f"{report['kind']} {namespace + '/' if namespace else ''}{name}: {status} {data.get('message')}{hint}"
        return f"{report['kind']} {namespace + '/' if namespace else ''}{name}: conflicts on every attempt"
