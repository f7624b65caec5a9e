"""`aiadmit`: one command, sub-commands in `webhook.app.commands.<name>`.

Each command module has `register(subparsers)` and sets `func` on its parser;
adding a command is adding a module and its name below. Exit codes: 0 clean,
1 policy failures, 2 usage or unreadable input.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module

from webhook import __version__

COMMANDS = ("serve", "audit", "fix", "test", "policies", "certs", "cel")


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
    return _execute(build_parser(), argv)[0]


def _execute(parser: argparse.ArgumentParser, argv: list[str] | None) -> tuple[int, bool]:
    """(exit code, whether the process may end at once) of one command line."""
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2, False
    try:
        return int(args.func(args) or 0), bool(getattr(args, "exit_at_once", False))
    except KeyboardInterrupt:
        return 130, False
    except BrokenPipeError:
        return 0, False


def entry() -> None:
    """`aiadmit` as a process (the console script and `python -m webhook`).

    A command that marks itself `exit_at_once` (a file audit: its output is
    written, nothing of it must be cleaned up) ends without Python freeing its
    heap object by object, which costs an audit of 5,000 objects 50 ms
    (bench/RESULTS.md); the operating system takes the memory back whole.
    """
    code, at_once = _execute(build_parser(), None)
    if at_once:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:
            pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
