"""Following a Delta table with delta-rs: reading only the files a follower has not seen."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaProtocolError

from lambdalake.lake.bookkeeping import FollowedTable

TS = pa.timestamp("us", tz="UTC")
KEY = [("window_start", "ascending"), ("page", "ascending"), ("n", "ascending")]


def rows(starts: list[datetime], pages: list[str | None], first: int) -> pa.Table:
    return pa.table({"window_start": pa.array(starts, TS), "page": pa.array(pages, pa.string()),
                     "n": pa.array(range(first, first + len(starts)), pa.int64())})


def test_the_files_a_commit_adds_read_as_the_rows_it_appended(tmp_path: Path) -> None:
    """Partition values with characters a path escapes (a timestamp's space and colons, a
    slash, a percent sign) and a null partition come back as written."""
    path = str(tmp_path / "t")
    noon = datetime(2026, 11, 20, 12, tzinfo=UTC)
    first = rows([noon, noon], ["/a b", None], 0)
    write_deltalake(path, first, partition_by=["window_start", "page"])
    followed = FollowedTable(path)
    followed.refresh()
    seen = followed.data_files()
    assert followed.read(seen).sort_by(KEY).equals(first.sort_by(KEY))

    second = rows([noon.replace(hour=13), noon], ["/c%d/e", "/a b"], 2)
    write_deltalake(path, second, mode="append", partition_by=["window_start", "page"])
    assert followed.refresh() == 1
    files = followed.data_files()
    added = {name: values for name, values in files.items() if name not in seen}
    assert len(added) == 2
    assert followed.read(added).sort_by(KEY).equals(second.sort_by(KEY))
    everything = DeltaTable(path).to_pyarrow_table().select(first.schema.names)
    assert followed.read(files).sort_by(KEY).equals(everything.sort_by(KEY))


def test_a_table_whose_files_alone_do_not_hold_its_rows_is_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([datetime(2026, 11, 20, tzinfo=UTC)], ["/a"], 0),
                    configuration={"delta.enableDeletionVectors": "true"})
    followed = FollowedTable(path)
    followed.refresh()
    with pytest.raises(DeltaProtocolError, match="deletionVectors"):
        followed.read(followed.data_files())


def test_a_follower_sees_that_a_newer_commit_exists_before_reading_it(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    followed = FollowedTable(path)
    assert not followed.moved()  # no table yet
    noon = datetime(2026, 11, 20, 12, tzinfo=UTC)
    write_deltalake(path, rows([noon], ["/a"], 0))
    assert followed.moved()
    followed.refresh()
    assert not followed.moved()
    write_deltalake(path, rows([noon], ["/b"], 1), mode="append")
    assert followed.moved()
    assert followed.refresh() == 1
    assert not followed.moved()
