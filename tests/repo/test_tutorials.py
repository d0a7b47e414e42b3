"""The tutorials' files and commands are the platform's own: each view and contract a
tutorial asks you to write loads and validates as written (beside the shipped ones), the
event its producer snippet builds is valid against that contract, and every `lambdalake`
command a tutorial shows parses with the CLI's own parser. (Running the steps on a stack
is not tested yet; each tutorial's note says so.)"""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from lambdalake.cli.main import build_parser
from lambdalake.contracts.registry import ContractRegistry
from lambdalake.settings import Settings
from lambdalake.views.definition import load_views
from tests.support.repo import REPO
from tests.support.tutorials import TUTORIALS, blocks

EVENTS_DIR, VIEWS_DIR = REPO / "schemas" / "events", REPO / "schemas" / "views"


def commands(page: str) -> list[list[str]]:
    """The `lambdalake` commands of a page's shell blocks, continuation lines joined and
    comments dropped, as argument lists."""
    found = []
    for block in blocks(page, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0].endswith("bin/lambdalake"):
                found.append(words[1:])
    return found


def views_with(directory: Path, contracts: ContractRegistry, definitions: list[str]
               ) -> dict[str, Any]:
    """The shipped views and ``definitions`` (each written to its own file, named after
    the view as the tutorial says), loaded together against ``contracts``."""
    shutil.copytree(VIEWS_DIR, directory)
    for definition in definitions:
        name = yaml.safe_load(definition)["name"]
        (directory / f"{name}.yaml").write_text(definition)
    return load_views(directory, contracts)


def test_add_a_view_defines_a_view_the_platform_loads(tmp_path: Path) -> None:
    [definition] = blocks("add-a-view.md", "yaml")
    views = views_with(tmp_path / "views", ContractRegistry(), [definition])
    view = views["device_traffic"]
    assert set(views) == set(load_views(VIEWS_DIR)) | {"device_traffic"}
    assert [m.kind for m in view.measures] == ["count", "distinct_count"]


def test_own_events_contract_view_and_producer_are_valid_together(tmp_path: Path) -> None:
    [contract] = blocks("own-events.md", "json")
    events = tmp_path / "events"
    shutil.copytree(EVENTS_DIR, events)
    (events / f"{json.loads(contract)['$id']}").write_text(contract)
    contracts = ContractRegistry(events)
    [definition] = blocks("own-events.md", "yaml")
    view = views_with(tmp_path / "views", contracts, [definition])["searches"]
    assert view.event_types == ["search"]
    [snippet] = blocks("own-events.md", "python")
    contracts.validate(built_event(snippet))


def built_event(snippet: str) -> dict[str, Any]:
    """The ``event`` the producer snippet sends: its imports and that assignment run (not
    the producer, which would reach for a broker)."""
    tree = ast.parse(snippet)
    kept = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
            or (isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "event")]
    scope: dict[str, Any] = {}
    exec(compile(ast.Module(kept, type_ignores=[]), "own-events.md", "exec"), scope)
    event: dict[str, Any] = scope["event"]
    return event


@pytest.mark.parametrize("page", sorted(path.name for path in TUTORIALS.glob("*.md")))
def test_every_command_a_tutorial_shows_parses(page: str) -> None:
    parser = build_parser()
    for arguments in commands(page):
        try:
            parser.parse_args(arguments)
        except SystemExit as exit:
            raise AssertionError(f"{page}: `lambdalake {shlex.join(arguments)}` does not "
                                 "parse") from exit


def test_the_tutorials_show_commands() -> None:
    """The parse and settings tests would pass on pages whose commands they cannot find."""
    assert [len(commands(page)) for page in ("add-a-view.md", "backfill.md", "own-events.md")
            ] == [2, 3, 3]
    assert len(SETTING.findall((TUTORIALS / "cluster.md").read_text())) == 12  # and settings


SETTING = re.compile(r"\bLAMBDALAKE_([A-Z0-9_]+?)(?:=([^\s`]+))?(?=[\s`*),.]|$)")


@pytest.mark.parametrize("page", sorted(path.name for path in TUTORIALS.glob("*.md")))
def test_every_setting_a_tutorial_names_is_one_and_takes_the_value_it_shows(
    page: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``LAMBDALAKE_SPARK__MASTER=spark://...``: the setting exists (a renamed one would be
    ignored silently: settings allow unknown variables) and reads the value as written;
    ``LAMBDALAKE_LAKE__OBJECT_STORE__*`` names a group of them."""
    for name, value in SETTING.findall((TUTORIALS / page).read_text()):
        found: Any = Settings()
        for part in name.lower().removesuffix("__").split("__"):
            assert part in type(found).model_fields, f"{page}: LAMBDALAKE_{name} is no setting"
            found = getattr(found, part)
        if value:
            monkeypatch.setenv(f"LAMBDALAKE_{name}", value)
            found = Settings()
            for part in name.lower().split("__"):
                found = getattr(found, part)
            assert str(found).lower() == value.lower(), (page, name, found)
            monkeypatch.delenv(f"LAMBDALAKE_{name}")
