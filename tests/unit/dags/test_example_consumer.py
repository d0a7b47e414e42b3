"""The example DAG of docs/examples/dags reads, through the query API, the rows of exactly
the windows a publish changed (its asset event's interval), every page of them."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import pytest

from tests.support.repo import REPO

EXAMPLE = REPO / "docs" / "examples" / "dags" / "page_traffic_consumer.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("page_traffic_consumer", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_reads_every_page_of_the_published_interval(
    example: ModuleType, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAMBDALAKE_API_URL", "http://api:8000/")
    asked: list[str] = []

    def get(url: str) -> dict[str, Any]:
        asked.append(url)
        return ({"rows": [{"n": 1}, {"n": 2}], "next_offset": 2} if len(asked) == 1
                else {"rows": [{"n": 3}], "next_offset": None})

    extra = {"start": "2026-11-20T10:00:00Z", "end": "2026-11-20T11:00:00Z"}
    assert list(example.published_rows("page_traffic", extra, get)) == [
        {"n": 1}, {"n": 2}, {"n": 3}]
    assert asked == [
        "http://api:8000/views/page_traffic/rows?from=2026-11-20T10%3A00%3A00Z"
        f"&to=2026-11-20T11%3A00%3A00Z&limit=1000&offset={offset}" for offset in (0, 2)]


def test_after_a_full_reprocess_it_reads_every_window(example: ModuleType) -> None:
    asked: list[str] = []

    def get(url: str) -> dict[str, Any]:
        asked.append(url)
        return {"rows": [], "next_offset": None}

    assert list(example.published_rows("page_traffic", {"start": None, "end": None}, get)) == []
    assert asked == ["http://127.0.0.1:8000/views/page_traffic/rows?limit=1000&offset=0"]
