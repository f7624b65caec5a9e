"""aiadmit: policy-as-code admission for AI workloads on Kubernetes.

One engine (`webhook.engine.core.Engine`) serves three thin adapters: the admission
webhook (`webhook.app.server`), the audit of files and clusters (`webhook.app.audit`),
and the fixer (`webhook.outputs.fix`). The subpackages are layers, each importing only
from those below it; docs/architecture.md draws them.
"""

__version__ = "0.1.0"
