"""docs/faults.md names the test behind each row: every test it names exists."""

from __future__ import annotations

import re

from tests.support.repo import REPO

NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)")
SHORT = re.compile(r"`(test_\w+\.py)::(\w+)`")


def test_every_test_the_fault_table_names_exists() -> None:
    page = (REPO / "docs" / "faults.md").read_text()
    named = NAMED.findall(page)
    assert len(named) > 50
    missing = [f"{path}::{name}" for path, name in named
               if not (REPO / path).is_file()
               or f"def {name}(" not in (REPO / path).read_text()]
    assert missing == []
    tests = {path.name: path for path in (REPO / "tests").rglob("test_*.py")}
    short = [f"{module}::{name}" for module, name in SHORT.findall(page)
             if module not in tests or f"def {name}(" not in tests[module].read_text()]
    assert short == []
