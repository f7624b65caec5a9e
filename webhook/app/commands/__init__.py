"""Sub-commands of `aiadmit`; each module: `register(subparsers)`, the parser's `func` runs it."""

from __future__ import annotations

import sys

from webhook.app import diskcache
from webhook.language.config import ConfigError
from webhook.engine.core import Engine
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.policy import PolicyLoadError


def add_engine_options(parser) -> None:
    parser.add_argument("--config", metavar="FILE", help="config file (extends the built-in defaults)")
    parser.add_argument("--policies", metavar="DIR", action="append",
                        help="policy files or directories instead of the built-in bundle; repeatable")
    parser.add_argument("--extra-policies", metavar="DIR", action="append",
                        help="policy files or directories loaded in addition to the built-in bundle (or to "
                             "--policies); an id already loaded is an error; repeatable")


def policy_paths(args) -> list[str] | None:
    """The policy paths the options name: --policies (else the bundle) plus --extra-policies; None: the bundle."""
    extra = list(getattr(args, "extra_policies", None) or [])
    if not extra:
        return args.policies or None
    return list(args.policies or [BUILTIN_POLICY_DIR]) + extra


def load_engine(args) -> Engine | None:
    """The engine for the command's options, or None after printing every load problem (exit 2).

    Command-line runs keep compiled CEL and passed schema checks in a disk cache (webhook/app/diskcache.py); the
    server does not.
    """
    directory = diskcache.default_directory()
    diskcache.activate(diskcache.DiskCache(directory) if directory else None)
    try:
        return Engine.load(policy_paths(args), args.config)
    except (PolicyLoadError, ConfigError) as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return None
