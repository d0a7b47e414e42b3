"""Reading Delta tables with delta-rs: following a table (only the files a follower has not
seen), and a gate's small slice (only the files it may need)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaProtocolError

from lambdalake.lake import delta_rs
from lambdalake.lake.delta_rs import (
    Additions,
    AdditionsReader,
    FollowedTable,
    Partition,
    TimeSlice,
    append_rows,
    count_slice,
    read_rows,
    read_small_slice,
)

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


def test_a_follower_catches_up_only_when_a_newer_commit_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Catching up lists the table's log; a follower polled between commits must not."""
    path = str(tmp_path / "t")
    noon = datetime(2026, 11, 20, 12, tzinfo=UTC)
    write_deltalake(path, rows([noon], ["/a"], 0))
    followed = FollowedTable(path)
    assert followed.refresh() == 0
    catch_ups: list[int] = []
    update = DeltaTable.update_incremental
    monkeypatch.setattr(DeltaTable, "update_incremental",
                        lambda table: catch_ups.append(table.version()) or update(table))
    assert [followed.refresh() for _ in range(3)] == [0, 0, 0]
    assert catch_ups == []
    for page in ("/b", "/c"):  # two commits between refreshes: caught up at once
        write_deltalake(path, rows([noon], [page], 1), mode="append")
    assert followed.refresh() == 2
    assert followed.refresh() == 2
    assert catch_ups == [0]
    assert followed.read(followed.data_files()).num_rows == 3

def events(times: list[datetime], first: int) -> pa.Table:
    return pa.table({"day": pa.array([t.date() for t in times], pa.date32()),
                     "at": pa.array(times, TS),
                     "n": pa.array(range(first, first + len(times)), pa.int64()),
                     "raw": pa.array([b"x" * 100] * len(times), pa.binary())})


def test_a_reader_folds_each_commits_files_once_and_starts_over_when_files_go(
    tmp_path: Path,
) -> None:
    """A fold gets the rows of the files a commit added; after a delete (files removed) or a
    fold that failed partway, it gets every file again, marked to start over (and a failed
    fold leaves the reader behind, so the serving API refreshes again at once)."""
    path = str(tmp_path / "t")
    noon = datetime(2026, 11, 20, 12, tzinfo=UTC)
    folded: list[tuple[int, bool, list[int]]] = []

    def fold(added: Additions) -> None:
        numbers = [] if added.rows is None else sorted(added.rows.column("n").to_pylist())
        folded.append((added.version, added.start_over, numbers))

    additions = AdditionsReader(FollowedTable(path))
    additions.poll(fold)  # no table yet
    write_deltalake(path, rows([noon, noon], ["/a", "/b"], 0))
    additions.poll(fold)
    additions.poll(fold)  # unchanged
    write_deltalake(path, rows([noon], ["/c"], 2), mode="append")
    additions.poll(fold)
    DeltaTable(path).delete("page = '/a'")
    additions.poll(fold)
    assert folded == [(0, False, [0, 1]), (1, False, [2]), (2, True, [1, 2])]

    def failing(added: Additions) -> None:
        fold(added)
        raise RuntimeError("partway")

    write_deltalake(path, rows([noon], ["/d"], 3), mode="append")
    assert additions.behind()
    with pytest.raises(RuntimeError):
        additions.poll(failing)
    assert additions.behind() and not additions.followed.moved()  # caught up, not folded
    additions.poll(fold)
    assert folded[-2:] == [(3, False, [3]), (3, True, [1, 2, 3])]
    assert additions.version == 3
    assert not additions.behind()


def test_appends_are_compacted_as_a_table_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bookkeeping table gains a file per append; every ``COMPACT_EVERY`` versions they
    are rewritten as one, and readers see the same rows."""
    monkeypatch.setattr(delta_rs, "COMPACT_EVERY", 3)
    path, schema = str(tmp_path / "log"), pa.schema([("n", pa.int64())])
    versions = [append_rows(path, schema, [{"n": n}]) for n in range(2)]
    assert versions == [1, 2] and len(DeltaTable(path).file_uris()) == 2
    assert append_rows(path, schema, [{"n": 2}]) == 3  # the compaction commits version 4
    assert len(DeltaTable(path).file_uris()) == 1 and DeltaTable(path).version() == 4
    append_rows(path, schema, [{"n": 3}])
    assert len(DeltaTable(path).file_uris()) == 2
    assert sorted(row["n"] for row in read_rows(path, schema)) == [0, 1, 2, 3]


def test_a_small_slice_is_read_whole_from_the_files_its_statistics_keep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files are pruned by partition and by min/max statistics; rows on the interval's
    bounds are in (start) or out (end) exactly; a slice too large is Spark's (None)."""
    path = str(tmp_path / "t")
    start, end = datetime(2026, 11, 20, 10, tzinfo=UTC), datetime(2026, 11, 20, 11, tzinfo=UTC)
    microsecond = timedelta(microseconds=1)
    commits = [[start - timedelta(hours=2), start - microsecond],  # before: pruned
               [start - microsecond, start, start + timedelta(minutes=5)],
               [end - microsecond, end],
               [end + timedelta(hours=1)],  # after: pruned
               [start + timedelta(days=1)]]  # another day: pruned by partition
    first = 0
    for times in commits:
        write_deltalake(path, events(times, first), mode="append", partition_by=["day"])
        first += len(times)
    inside = TimeSlice("at", start, end,
                       partitions=(("day", ">=", start.date()), ("day", "<=", end.date())))
    assert len(DeltaTable(path).file_uris(file_pruning_predicate=list(inside.files))) == 2

    rows = read_small_slice(path, inside, max_rows=3, without=["raw"])
    assert rows is not None and rows.column_names == ["day", "at", "n"]
    assert sorted(rows.column("n").to_pylist()) == [3, 4, 5]
    assert count_slice(path, inside) == 3
    assert count_slice(path, Partition("day", start.date())) == 8  # all but the next day's
    assert read_small_slice(path, inside, max_rows=2) is None
    assert read_small_slice(path, inside, max_rows=3, columns=["n"]).column_names == ["n"]
    at_version_one = read_small_slice(path, inside, max_rows=3, version=1)
    assert at_version_one is not None and at_version_one.num_rows == 2
    monkeypatch.setattr("lambdalake.lake.delta_rs.LOCAL_READ_MAX_BYTES", 100)
    assert read_small_slice(path, inside, max_rows=3) is None  # its files are larger


def test_a_table_with_deletion_vectors_is_left_to_spark(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    noon = datetime(2026, 11, 20, 12, tzinfo=UTC)
    write_deltalake(path, events([noon], 0),
                    configuration={"delta.enableDeletionVectors": "true"})
    day = TimeSlice("at", noon - timedelta(hours=12), noon + timedelta(hours=12))
    assert read_small_slice(path, day, max_rows=10) is None
