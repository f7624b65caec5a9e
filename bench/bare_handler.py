"""The ceiling of the webhook's stack: a Flask handler that only parses the review and answers `allowed`.

What issue 25 measures aiadmit's webhook against (bench/ceiling.py serves it): the same Flask, gunicorn with its
`gthread` worker (2 workers x 4 threads), TLS with the same certificates and bench/load.py as the client. Nothing
of aiadmit is imported, so the figure is the stack alone: HTTP and TLS, the WSGI call, one `json.loads` of the
review and one `json.dumps` of the answer.

    gunicorn --worker-class gthread --workers 2 --threads 4 --certfile tls.crt --keyfile tls.key \
        --bind 127.0.0.1:PORT --chdir bench bare_handler:app
"""

from __future__ import annotations

import json

from flask import Flask, Response, request

app = Flask(__name__)


@app.post("/validate")
def validate() -> Response:
    review = json.loads(request.get_data())
    answer = {"apiVersion": review.get("apiVersion", "admission.k8s.io/v1"), "kind": "AdmissionReview",
              "response": {"uid": (review.get("request") or {}).get("uid", ""), "allowed": True}}
    return Response(json.dumps(answer), mimetype="application/json")
