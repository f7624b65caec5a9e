"""Sub-commands of `aiadmit`; each module: `register(subparsers)`, the parser's `func` runs it."""

from __future__ import annotations

import importlib.util
import sys

from webhook.app import diskcache
from webhook.language.config import ConfigError
from webhook.engine.core import Engine
from webhook.language.bundle import BUILTIN_POLICY_DIR
from webhook.language.policy import PolicyLoadError
from webhook.outputs.diagnostics import emit, of_problem


def missing_extra(command: str, extra: str, modules: tuple[str, ...]) -> int | None:
    """Exit code 2 after saying how to install `extra` when one of its `modules` is absent; None when all are there.

    The command-line audit installs without the server stack (pyproject's extras), so a command that needs it
    says so instead of failing with an import traceback."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    print(f"error: `aiadmit {command}` needs {', '.join(missing)}, which this installation lacks: "
          f"pip install 'aiadmit[{extra}]' (from a checkout: pip install '.[{extra}]')", file=sys.stderr)
    return 2


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
    try:
        return Engine.load(policy_paths(args), args.config, cache=diskcache.DiskCache(directory) if directory else None)
    except (PolicyLoadError, ConfigError) as exc:
        for problem in exc.problems:
            emit(of_problem(problem))
        return None
