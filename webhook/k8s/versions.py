"""The Kubernetes versions aiadmit follows: which are supported, which one is the reference, and, for each, what its
API server's admission CEL accepts.

Why one table: a policy's `kubernetesVersion` (the oldest API server its CEL must stay portable to), the CEL
checker's load-time portability check, `aiadmit export --kubernetes-version` and the docs must agree on the same
facts, and the facts change with every release. Data only; nothing here parses CEL.

The facts, as read in each release's sources (k8s.io/apiserver pkg/cel/environment/base.go, each go.mod):

- Run-time semantics are the reference's (1.37): cel-go v0.29.2. 1.35 and 1.36 run cel-go v0.26.0.
- An API server compiles a *new* expression (a policy created, or an expression changed) in the environment of its
  compatibility version, by default one minor below its own, so that a rollback still runs what was written
  (`--min-compatibility-version` raises it); expressions already stored, and every policy it runs, get every library
  its binary has. A library is gated by the compatibility version that introduced it: the lists library's version 1
  (`<list>.includes(<value>)`) came in 1.37, so a 1.37 API server runs it but refuses it in a new expression, and
  only 1.38 accepts it new. The base environment gained nothing in 1.35 and 1.36.
- What the binary parses is not gated: cel-go v0.29's parser (1.37) accepts backquoted field names (a.`b-c`);
  1.35 and 1.36 refuse them, new or stored.
- MutatingAdmissionPolicy is served as admissionregistration.k8s.io/v1 and on by default since 1.36 (GA); 1.35
  serves v1beta1, off by default.
"""

from __future__ import annotations

from typing import Optional

from webhook.model.valueclass import Compared, Frozen


class KubernetesVersion(Frozen, Compared):
    """One supported minor release of Kubernetes and what its API server's admission CEL has."""

    minor: int
    cel_go: str  # the cel-go version its API server is built with
    mutating_admission_policy: str  # the MutatingAdmissionPolicy apiVersion it serves ("" when off by default)

    def __init__(self, minor: int, cel_go: str, mutating_admission_policy: str) -> None:
        object.__setattr__(self, "minor", minor)
        object.__setattr__(self, "cel_go", cel_go)
        object.__setattr__(self, "mutating_admission_policy", mutating_admission_policy)

    def _compared(self) -> tuple:
        """The fields `==` compares and the hash digests."""
        return (self.minor, self.cel_go, self.mutating_admission_policy)

    @property
    def name(self) -> str:
        return f"1.{self.minor}"

    @property
    def new_expressions(self) -> int:
        """The compatibility version (as a minor) its API server compiles new expressions in, by default."""
        return self.minor - 1

    def __str__(self) -> str:
        return self.name


SUPPORTED = (
    KubernetesVersion(35, "v0.26.0", ""),
    KubernetesVersion(36, "v0.26.0", "admissionregistration.k8s.io/v1"),
    KubernetesVersion(37, "v0.29.2", "admissionregistration.k8s.io/v1"),
)
REFERENCE = SUPPORTED[-1]  # run-time semantics: what aiadmit's CEL answers
DEFAULT_PORTABILITY = SUPPORTED[0]  # a policy that names no kubernetesVersion stays portable to the oldest


def version(text: str) -> KubernetesVersion:
    """The supported version named `text` ("1.36"); ValueError naming the supported ones otherwise."""
    for known in SUPPORTED:
        if text == known.name:
            return known
    raise ValueError(f"Kubernetes {text!r} is not a supported version (supported: "
                     f"{', '.join(v.name for v in SUPPORTED)}; the reference is {REFERENCE})")


class CelFeature(Frozen):
    """Kubernetes CEL that only some versions accept: a library gated by a compatibility version (`library`), or
    syntax of the binary's parser (`parser`), each the minor that introduced it."""

    name: str
    what: str
    library: Optional[int] = None
    parser: Optional[int] = None

    def __init__(self, name: str, what: str, library: Optional[int] = None, parser: Optional[int] = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "what", what)
        object.__setattr__(self, "library", library)
        object.__setattr__(self, "parser", parser)

    def runs_on(self, server: KubernetesVersion) -> bool:
        """Whether `server` runs an expression that uses it (stored: every library its binary has)."""
        return server.minor >= (self.library if self.library is not None else self.parser)

    def accepted_new_by(self, server: KubernetesVersion) -> bool:
        """Whether `server`, with its default flags, accepts it in a new expression."""
        if self.library is not None:
            return server.new_expressions >= self.library
        return server.minor >= self.parser

    def refusal(self, server: KubernetesVersion) -> Optional[str]:
        """Why a `server` API server refuses a new expression that uses it, or None when it accepts one."""
        if self.accepted_new_by(server):
            return None
        if self.library is not None:
            first = self.library + 1
            stored = (f"; a {server} API server runs it only in an expression already stored"
                      if self.runs_on(server) else "")
            return (f"{self.what} is Kubernetes 1.{self.library}'s (compatibility version 1.{self.library}): an API "
                    f"server accepts it in a new expression from 1.{first} (its default compatibility version is "
                    f"one minor below its own){stored}")
        return f"{self.what} is accepted by Kubernetes 1.{self.parser}'s CEL parser (cel-go v0.29) and later, " \
               f"not by {server}'s"


FEATURES = {
    "includes": CelFeature("includes", "`<list>.includes(<value>)` (Kubernetes' lists library, version 1)",
                           library=37),
    "backquoted": CelFeature("backquoted", "a backquoted field name (x.`b-c`)", parser=37),
}
