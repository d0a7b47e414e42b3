"""No settings leaking in from the environment or a .env file: the unit and repository tiers
run on the defaults (their conftests use ``isolated_settings``), with the project dir the
run was given (an installed package has no other)."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lambdalake.settings import PROJECT_DIR_VARIABLE, get_settings


@pytest.fixture(autouse=True)
def isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Each unit test sees the defaults, and leaves no settings behind: what code under test
    caches in ``get_settings()`` was read from this test's environment, so it is dropped
    afterwards (or a later test, integration ones included, would get the defaults' ports
    and state dir instead of the session's)."""
    for key in list(os.environ):
        if key.startswith("LAMBDALAKE_") and key != PROJECT_DIR_VARIABLE:  # where the project
            monkeypatch.delenv(key)  # is: an installed package's default, as a checkout's is
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()
