"""Commands about the documentation derived from code: the settings table, the contracts'
pages."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from lambdalake.settings import Settings, documented_variables

SETTINGS_TABLE_START = "<!-- settings-table"
SETTINGS_TABLE_END = "<!-- /settings-table -->"

if TYPE_CHECKING:
    from lambdalake.cli import Commands


def settings_table() -> str:
    rows = [f"| `{name}` | `{default}` | {description} |"
            for name, default, description in documented_variables()]
    return "\n".join(["| variable | default | meaning |", "| --- | --- | --- |", *rows]) + "\n"


def cmd_settings(_settings: Settings, _args: argparse.Namespace) -> int:
    print(settings_table(), end="")
    return 0


def cmd_docs(settings: Settings, _args: argparse.Namespace) -> int:
    """Regenerate the documentation derived from code: the settings table, the contracts."""
    from lambdalake.contracts.registry import ContractRegistry, EntityRegistry, contracts_markdown

    page = settings.project_path("docs", "reference", "settings.md")
    text = page.read_text()
    start = text.index("\n", text.index(SETTINGS_TABLE_START)) + 1
    end = text.index(SETTINGS_TABLE_END)
    page.write_text(text[:start] + settings_table() + text[end:])
    settings.project_path("docs", "events.md").write_text(
        contracts_markdown(ContractRegistry()) + "\n")
    settings.project_path("docs", "entities.md").write_text(
        contracts_markdown(EntityRegistry()) + "\n")
    print("updated docs/reference/settings.md, docs/events.md and docs/entities.md")
    return 0


def add_commands(commands: Commands) -> None:
    commands.add_parser("settings", help="all settings as a Markdown table").set_defaults(
        run=cmd_settings
    )
    commands.add_parser("docs", help="regenerate docs derived from code").set_defaults(
        run=cmd_docs
    )
