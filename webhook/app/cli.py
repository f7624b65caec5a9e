"""`aiadmit`: one command, sub-commands in `webhook.app.commands.<name>`.

Each command module has `register(subparsers)` and sets `func` on its parser;
adding a command is adding a module and its name below. Exit codes: 0 clean,
1 policy failures, 2 usage or unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from importlib import import_module

from webhook import __version__

COMMANDS = ("serve", "audit", "fix", "test", "policies", "certs", "cel", "export", "reports-controller")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command; given the command line, of just the command it names first, if any.

    Building one command's parser imports one command module: `aiadmit audit FILE` (the pre-commit hook's run)
    does not import what `test`, `serve` or `certs` need. A command line that names no command (`--help`,
    `--version`, a misspelt command) gets them all, so the help and the list of choices are whole."""
    parser = argparse.ArgumentParser(
        prog="aiadmit", description="Admission policies for AI workloads on Kubernetes: webhook, audit, fix.")
    parser.add_argument("--version", action="version", version=f"aiadmit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = argv[0] if argv and argv[0] in COMMANDS else None
    for name in (named,) if named else COMMANDS:
        try:
            module = import_module(f"{__package__}.commands.{name.replace('-', '_')}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.commands.{name.replace('-', '_')}":
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The exit code of one command line run in this process, which goes on afterwards (tests, embedding)."""
    return _execute(build_parser(sys.argv[1:] if argv is None else argv), argv)


def _execute(parser: argparse.ArgumentParser, argv: list[str] | None, one_shot: bool = False) -> int:
    """The exit code of one command line. `one_shot`: the process ends with it, so a command may leave what it
    built to the exit (`args.one_shot`; the audit freezes its objects out of the garbage collector's reach)."""
    args = parser.parse_args(argv)
    args.one_shot = one_shot
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def entry() -> None:
    """`aiadmit` as a process (the console script and `python -m webhook`)."""
    sys.exit(_execute(build_parser(sys.argv[1:]), None, one_shot=True))


if __name__ == "__main__":  # pragma: no cover
    entry()
