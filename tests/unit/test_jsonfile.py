"""Shared JSON files: readers see a whole document, writers never share a temporary file."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lambdalake.jsonfile import replace_json


def test_a_document_is_replaced_whole_and_values_json_lacks_are_encoded(tmp_path: Path) -> None:
    path = tmp_path / "status" / "speed.json"
    replace_json(path, {"views": {"a": 1}})
    replace_json(path, {"at": datetime(2026, 11, 27, tzinfo=UTC)}, default=str)
    assert json.loads(path.read_text()) == {"at": "2026-11-27 00:00:00+00:00"}
    assert [p.name for p in path.parent.iterdir()] == ["speed.json"]


def test_a_failed_write_keeps_the_old_document_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "marks.json"
    replace_json(path, {"views": {"a": "2026-11-27T00:00:00Z"}})
    with pytest.raises(TypeError):
        replace_json(path, {"views": {"a": object()}})
    assert json.loads(path.read_text()) == {"views": {"a": "2026-11-27T00:00:00Z"}}
    assert [p.name for p in tmp_path.iterdir()] == ["marks.json"]


def test_concurrent_writers_and_a_reader_only_ever_meet_whole_documents(tmp_path: Path) -> None:
    path = tmp_path / "late-rows-waiting.json"
    replace_json(path, {"writer": -1, "rows": list(range(2000))})
    seen: list[int] = []
    stop = threading.Event()

    def write(writer: int) -> None:
        for _ in range(200):
            replace_json(path, {"writer": writer, "rows": list(range(2000))})

    def read() -> None:
        while not stop.is_set():
            seen.append(json.loads(path.read_text())["writer"])  # raises on half a file

    reader = threading.Thread(target=read)
    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    reader.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    reader.join()
    assert set(seen) - {-1} <= {0, 1, 2, 3} and seen
    assert json.loads(path.read_text())["writer"] in {0, 1, 2, 3}
    assert [p.name for p in tmp_path.iterdir()] == ["late-rows-waiting.json"]
