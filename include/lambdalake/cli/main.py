"""``lambdalake``: the parser assembled from the command groups, and the entry point."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from lambdalake.cli import data, docs, quality, stack
from lambdalake.settings import ProjectDirUnset, get_settings

DESCRIPTION = """The platform's command line (the Makefile wraps it): the stack, the data, its
quality and the docs derived from code. `lambdalake <command> --help` for each."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lambdalake", description=DESCRIPTION)
    commands = parser.add_subparsers(dest="command", required=True)
    for group in (stack, data, quality, docs):
        group.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(get_settings(), args))
    except Exception as error:
        from lambdalake.stack.process import StackError

        if isinstance(error, StackError | ProjectDirUnset):
            print(f"lambdalake {args.command}: {error}", file=sys.stderr)
            return 2
        raise


def console() -> None:
    """The ``lambdalake`` command: ``main``, then exit without interpreter teardown.

    Native thread pools of the readers (Arrow's, delta-rs's) can abort a finishing process
    ("terminate called without an active exception", exit -6) after its output is complete;
    a command's result must not depend on that. Output is flushed first; nothing else of
    the command's work is pending at this point.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
