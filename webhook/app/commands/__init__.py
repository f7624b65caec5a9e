"""Sub-commands of `aiadmit`; each module: `register(subparsers)`, the parser's `func` runs it."""

from __future__ import annotations

import sys

from webhook.app import diskcache
from webhook.language.config import ConfigError
from webhook.engine.core import Engine
from webhook.language.policy import PolicyLoadError


def add_engine_options(parser) -> None:
    parser.add_argument("--config", metavar="FILE", help="config file (extends the built-in defaults)")
    parser.add_argument("--policies", metavar="DIR", action="append",
                        help="policy files or directories (default: the built-in bundle); repeatable")


def load_engine(args) -> Engine | None:
    """The engine for the command's options, or None after printing every load problem (exit 2).

    Command-line runs keep compiled CEL and passed schema checks in a disk cache (webhook/app/diskcache.py); the
    server does not.
    """
    directory = diskcache.default_directory()
    try:
        return Engine.load(args.policies, args.config, cache=diskcache.DiskCache(directory) if directory else None)
    except (PolicyLoadError, ConfigError) as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return None
