"""The live LocalQueue cache reads Kueue at the version its API server serves (webhook/inputs/livefacts.py).

Kueue v0.20 stopped serving kueue.x-k8s.io/v1beta1; Kueue before v0.15 served nothing else. A cache pinned to one
version would take the other's 404 for "Kueue is not installed" and answer that no LocalQueue exists, so every
Kueue-queued gang would be reported as naming a queue that does not exist. Here a real HTTP server on loopback
answers as each Kueue does, and the kubernetes client's own list call goes through `FirstServed`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from webhook.inputs.livefacts import KUEUE_GROUP, KUEUE_PLURAL, KUEUE_VERSIONS, FirstServed


def _serve(served: set[str]):
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(self.path)
            version = self.path.split("/")[3] if self.path.startswith(f"/apis/{KUEUE_GROUP}/") else ""
            if version in served:
                body = {"apiVersion": f"{KUEUE_GROUP}/{version}", "kind": "LocalQueueList",
                        "metadata": {"resourceVersion": "7"},
                        "items": [{"apiVersion": f"{KUEUE_GROUP}/{version}", "kind": "LocalQueue",
                                   "metadata": {"name": "team-a", "namespace": "ml"}}]}
                status = 200
            else:
                body, status = {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}, 404
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
    return server, client.ApiClient(configuration), asked


@pytest.mark.parametrize("served, expect", [({"v1beta2"}, "v1beta2"),             # Kueue v0.20 and later
                                            ({"v1beta1", "v1beta2"}, "v1beta2"),  # Kueue v0.15 - v0.19
                                            ({"v1beta1"}, "v1beta1")])            # Kueue before v0.15
def test_local_queues_are_listed_at_the_version_served(served, expect):
    server, api, asked = _serve(served)
    try:
        call = FirstServed(client.CustomObjectsApi(api).list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSIONS,
                           KUEUE_PLURAL)
        data = json.loads(call(_preload_content=False, _request_timeout=5).data)
        assert [item["metadata"]["name"] for item in data["items"]] == ["team-a"]
        assert call.version == expect
        asked.clear()
        call(_preload_content=False, _request_timeout=5)
        assert [path.split("?")[0] for path in asked] == [f"/apis/{KUEUE_GROUP}/{expect}/{KUEUE_PLURAL}"]
    finally:
        server.shutdown()


def test_no_kueue_is_a_404_for_the_caller():
    """Neither version served: the caller gets the 404 (an optional cache then knows that no LocalQueue exists)."""
    server, api, asked = _serve(set())
    try:
        call = FirstServed(client.CustomObjectsApi(api).list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSIONS,
                           KUEUE_PLURAL)
        with pytest.raises(ApiException) as caught:
            call(_preload_content=False, _request_timeout=5)
        assert caught.value.status == 404
        assert len(asked) == len(KUEUE_VERSIONS)
    finally:
        server.shutdown()
