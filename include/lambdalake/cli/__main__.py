"""``python -m lambdalake.cli``: the ``lambdalake`` command."""

from lambdalake.cli.main import console

console()
