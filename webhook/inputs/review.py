"""AdmissionReview (admission.k8s.io/v1) requests: parsed, checked for what aiadmit needs, turned into Resources.

Pure functions over the decoded body; a request that is not an AdmissionReview
aiadmit can answer raises ReviewError (HTTP 400 with the reason).
"""

from __future__ import annotations

import json
from typing import Optional

from webhook.model.resource import Origin, Resource

API_VERSION = "admission.k8s.io/v1"
SKIPPED_OPERATIONS = ("DELETE", "CONNECT")
CHECKED_OPERATIONS = ("CREATE", "UPDATE")
# Of pods: kubectl debug's ephemeralcontainers, and in-place resize (GA in 1.35). Every other subresource (status,
# scale, ...) is not checked.
CHECKED_SUBRESOURCES = ("ephemeralcontainers", "resize")


class ReviewError(Exception):
    """A request that is not an AdmissionReview we can answer: HTTP 400 with this reason."""

    def __init__(self, reason: str, status: int = 400):
        super().__init__(reason)
        self.reason = reason
        self.status = status


def parse(body: bytes) -> dict:
    """The review's `request`, checked for what we need; ReviewError otherwise."""
    try:
        review = json.loads(body)
    except RecursionError:
        raise ReviewError("request body nests too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReviewError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(review, dict):
        raise ReviewError(f"expected an AdmissionReview object, got a JSON {type(review).__name__}")
    if review.get("kind") != "AdmissionReview":
        raise ReviewError("expected kind AdmissionReview")
    if review.get("apiVersion") != API_VERSION:
        raise ReviewError(f"unsupported apiVersion {review.get('apiVersion')!r}: only {API_VERSION} is served "
                          f"(set admissionReviewVersions: [v1] in the webhook configuration)")
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing or not a string")
    return request


def describe(request: dict) -> dict:
    """Log fields of a request: coordinates only."""
    kind = request.get("kind") if isinstance(request.get("kind"), dict) else {}
    return {"uid": str(request.get("uid", "")), "kind": str(kind.get("kind", "")),
            "namespace": str(request.get("namespace") or ""), "name": str(request.get("name") or ""),
            "operation": str(request.get("operation") or ""), "dry_run": bool(request.get("dryRun"))}


def resource_of(request: dict, key: str) -> Optional[Resource]:
    """The object of a request as a Resource, with the request's `kind` and `namespace` in it.

    The API server routes, authorises and stores by the request's kind and namespace (a pod created in
    namespace `tenant` is there whatever its body's metadata.namespace says); the body's own fields are the
    user's to write. So the request's win: an object cannot disguise itself as another kind, or as a member of an
    excluded namespace, to meet other policies than the ones the API server's decision will be judged by.
    """
    obj = request.get(key)
    if not isinstance(obj, dict):
        return None
    obj = dict(obj)  # never change the caller's dict; shallow is enough for the fields filled in below
    kind = request.get("kind") if isinstance(request.get("kind"), dict) else {}
    if isinstance(kind.get("kind"), str) and kind["kind"]:
        obj["kind"] = kind["kind"]
        group, version = kind.get("group", ""), kind.get("version", "")
        if isinstance(group, str) and isinstance(version, str) and version:
            obj["apiVersion"] = f"{group}/{version}" if group else version
    metadata = obj.get("metadata")
    namespace = request.get("namespace")
    if isinstance(metadata, dict) and isinstance(namespace, str) and namespace \
            and metadata.get("namespace") != namespace:
        obj["metadata"] = {**metadata, "namespace": namespace}
    # CEL's `oldObject` (ValidatingAdmissionPolicy's): the stored object on UPDATE, null otherwise (a CREATE has
    # none, whatever a review says; the old object judged for what an UPDATE already had has none either)
    old = request.get("oldObject") if key == "object" and request.get("operation") == "UPDATE" else None
    return Resource(obj, Origin(uid=request["uid"], operation=request.get("operation"),
                                old_object=old if isinstance(old, dict) else None))
