"""aiadmit: policy-as-code admission for AI workloads on Kubernetes.

One engine (`webhook.engine.Engine`) serves three thin adapters: the admission
webhook (`webhook.server`), the audit of files and clusters (`webhook.audit`),
and the fixer (`webhook.fix`). See docs/architecture.md.
"""

__version__ = "0.1.0"
