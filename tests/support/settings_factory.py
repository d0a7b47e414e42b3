"""The unit tier's settings, built in one place (as dbt's shared project fixtures build a test
project): the defaults with the state dir in the test's own ``tmp_path`` (so nothing reaches
the repository's ``.state`` or a running stack's), plus what the test overrides.
``tests/unit/conftest.py`` registers both fixtures; the integration tier keeps
``tests/support/stacks.py``'s session-wide ``settings``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pytest

from lambdalake.settings import Settings


class MakeSettings(Protocol):
    """What ``make_settings`` hands a test: its type, for the tests' annotations."""

    def __call__(self, **overrides: Any) -> Settings:
        """The defaults with the state dir in the test's ``tmp_path``, and the keyword
        overrides over them (a ``state_dir`` among them wins)."""
        ...


@pytest.fixture
def make_settings(tmp_path: Path) -> MakeSettings:
    """A factory for the test's settings, so a test names only what it changes (top-level
    fields and nested sections as keywords: ``make_settings(batch={"start_date": day})``)
    and every test's state stays in its own directory."""

    def make(**overrides: Any) -> Settings:
        return Settings(**{"state_dir": tmp_path, **overrides})

    return make


@pytest.fixture
def settings(make_settings: MakeSettings) -> Settings:
    """The defaults, with the state dir in the test's ``tmp_path``: what most tests need."""
    return make_settings()
