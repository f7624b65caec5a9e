"""`aiadmit`: one command, sub-commands in `webhook.commands.<name>`.

Each command module has `register(subparsers)` and sets `func` on its parser;
adding a command is adding a module and its name below. Exit codes: 0 clean,
1 policy failures, 2 usage or unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from . import __version__

COMMANDS = ("serve", "audit", "fix", "test", "policies", "certs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiadmit", description="Admission policies for AI workloads on Kubernetes: webhook, audit, fix.")
    parser.add_argument("--version", action="version", version=f"aiadmit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = import_module(f"{__package__}.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.commands.{name}":
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
