"""The serving merge and its queries over small Delta tables written with delta-rs (no JVM)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lambdalake.batch.late_arrivals import LateArrivals, Waiting, WaitingWindow
from lambdalake.batch.publication import PUBLICATIONS_TABLE, HighWaterMarks
from lambdalake.lake.delta_rs import FollowedTable, compact
from lambdalake.serving.query import QueryError, UnknownView, parse_query, run_query
from lambdalake.serving.snapshot import SnapshotStore, by_window
from lambdalake.settings import Settings
from lambdalake.speed.realtime import realtime_table
from lambdalake.streaming.progress import write_status
from lambdalake.views.catalog import physical_table
from lambdalake.views.definition import ViewDefinition, load_views
from tests.support.serving_tables import (
    MIDNIGHT,
    TS,
    append_realtime,
    hour,
    publish_hours,
    view_columns,
    write_batch,
)
from tests.support.settings_factory import MakeSettings


@pytest.fixture
def lake(make_settings: MakeSettings) -> Settings:
    return make_settings(batch={"start_date": date(2026, 11, 20)})


@pytest.fixture
def views() -> dict[str, ViewDefinition]:
    return load_views()


def answer(store: SnapshotStore, views: dict[str, ViewDefinition], **request: object) -> list:
    store.refresh()
    query = parse_query(views, "page_traffic", **request)  # type: ignore[arg-type]
    return [(r["window_start"][11:13], r["page"], r["views"], r["source"])
            for r in run_query(store.get("page_traffic"), query).rows]


def test_batch_answers_before_the_mark_and_realtime_from_it(
    lake: Settings, views: dict[str, ViewDefinition]
) -> None:
    write_batch(lake, [(0, "/a", 10), (1, "/a", 11)])
    append_realtime(lake, 0, [(0, "/a", 9), (1, "/a", 5), (2, "/a", 1)])
    append_realtime(lake, 1, [(1, "/a", 7), (2, "/a", 2)])  # more events of two keys
    store = SnapshotStore(lake, views)
    # nothing published: the mark is the first day's midnight, real-time answers everything
    assert answer(store, views) == [("00", "/a", 9, "realtime"), ("01", "/a", 12, "realtime"),
                                    ("02", "/a", 3, "realtime")]
    publish_hours(lake, 0)
    assert answer(store, views) == [("00", "/a", 10, "batch"), ("01", "/a", 12, "realtime"),
                                    ("02", "/a", 3, "realtime")]
    publish_hours(lake, 1)
    assert answer(store, views) == [("00", "/a", 10, "batch"), ("01", "/a", 11, "batch"),
                                    ("02", "/a", 3, "realtime")]
    snapshot = store.get("page_traffic")
    assert snapshot.high_water_mark == hour(2)


def test_a_slice_published_beyond_a_gap_is_answered_by_batch_and_the_gap_by_realtime(
    lake: Settings, views: dict[str, ViewDefinition]
) -> None:
    write_batch(lake, [(0, "/a", 10), (2, "/a", 12), (3, "/a", 13), (5, "/a", 15)])
    append_realtime(lake, 0, [(h, "/a", h) for h in range(7)])
    publish_hours(lake, 0, 2, 3, 5)  # hours 1 and 4 were never published
    store = SnapshotStore(lake, views)
    assert answer(store, views) == [
        ("00", "/a", 10, "batch"), ("01", "/a", 1, "realtime"), ("02", "/a", 12, "batch"),
        ("03", "/a", 13, "batch"), ("04", "/a", 4, "realtime"), ("05", "/a", 15, "batch"),
        ("06", "/a", 6, "realtime")]
    assert answer(store, views, start="2026-11-20T02:30Z", end="2026-11-20T05:00Z") == [
        ("03", "/a", 13, "batch"), ("04", "/a", 4, "realtime")]
    snapshot = store.get("page_traffic")
    assert snapshot.high_water_mark == hour(1)
    assert snapshot.batch_beyond_mark == ((hour(2), hour(4)), (hour(5), hour(6)))
    query = parse_query(views, "page_traffic")
    assert run_query(snapshot, query).snapshot["batch_beyond_mark"] == [
        ["2026-11-20T02:00:00Z", "2026-11-20T04:00:00Z"],
        ["2026-11-20T05:00:00Z", "2026-11-20T06:00:00Z"]]
    write_batch(lake, [(h, "/a", 10 + h) for h in (0, 1, 2, 3, 5)])
    publish_hours(lake, 1)  # the first gap filled: the mark jumps to the next one
    assert answer(store, views)[1:5] == [("01", "/a", 11, "batch"), ("02", "/a", 12, "batch"),
                                         ("03", "/a", 13, "batch"), ("04", "/a", 4, "realtime")]
    assert store.get("page_traffic").batch_beyond_mark == ((hour(5), hour(6)),)


def test_new_realtime_files_are_read_incrementally_and_a_retire_is_seen(
    lake: Settings, views: dict[str, ViewDefinition]
) -> None:
    append_realtime(lake, 0, [(3, "/b", 1)])
    store = SnapshotStore(lake, views)
    assert answer(store, views) == [("03", "/b", 1, "realtime")]
    append_realtime(lake, 1, [(3, "/b", 4), (4, "/b", 1)])
    assert answer(store, views) == [("03", "/b", 5, "realtime"), ("04", "/b", 1, "realtime")]
    snapshot = store.get("page_traffic")
    assert [r["unique_users"] for r in snapshot.realtime_rows.to_pylist()] == [1, 1]
    DeltaTable(lake.table_path(realtime_table("page_traffic"))).delete(
        "window_start < '2026-11-20T04:00:00Z'")
    assert answer(store, views) == [("04", "/b", 1, "realtime")]


def test_each_commit_merges_into_the_held_values_as_a_full_merge_would(
    lake: Settings, views: dict[str, ViewDefinition]
) -> None:
    """A refresh merges only the keys a new commit touches (a null dimension is a key too);
    the held values must equal what merging every partial row of the table gives."""
    from lambdalake.speed.partials import merge_partials, with_estimates

    view = views["page_traffic"]
    store = SnapshotStore(lake, views)
    commits = [[(3, "/b", 1), (3, None, 2)], [(3, "/b", 4), (4, "/c", 1)],
               [(3, None, 5), (4, "/c", 2), (5, "/b", 1)], [(3, "/b", 2)]]
    for batch_id, rows in enumerate(commits):
        append_realtime(lake, batch_id, rows)
        store.refresh()
        table = DeltaTable(lake.table_path(realtime_table("page_traffic"))).to_pyarrow_table()
        expected = by_window(with_estimates(merge_partials(table, view), view))
        held = store.get("page_traffic").realtime_rows
        assert sorted(map(str, held.to_pylist())) == sorted(map(str, expected.to_pylist()))
    assert answer(store, views) == [("03", "/b", 7, "realtime"), ("03", None, 7, "realtime"),
                                    ("04", "/c", 3, "realtime"), ("05", "/b", 1, "realtime")]


def test_a_rewritten_interval_is_read_again_and_nothing_else(
    lake: Settings, views: dict[str, ViewDefinition], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish rewrites one interval of the batch view: a refresh reads the files that
    commit added, drops the rows of the files it removed, and equals a full read."""
    write_batch(lake, [(h, "/a", h) for h in range(4)])
    publish_hours(lake, 0, 1, 2, 3)
    store = SnapshotStore(lake, views)
    store.refresh()
    reads: list[str] = []
    read = FollowedTable.read
    monkeypatch.setattr(FollowedTable, "read",
                        lambda self, files: reads.extend(files) or read(self, files))
    path = lake.table_path(physical_table("page_traffic", 1))
    write_deltalake(path, pa.table({**view_columns([(2, "/a", 20), (2, "/b", 21)]),
                                    "run_id": ["rerun"] * 2,
                                    "bronze_version": pa.array([4, 4], pa.int64()),
                                    "computed_at": pa.array([MIDNIGHT] * 2, TS)}),
                    mode="overwrite", predicate="window_start = '2026-11-20T02:00:00Z'",
                    partition_by=["window_start"])
    assert answer(store, views) == [("00", "/a", 0, "batch"), ("01", "/a", 1, "batch"),
                                    ("02", "/a", 20, "batch"), ("02", "/b", 21, "batch"),
                                    ("03", "/a", 3, "batch")]
    assert len(reads) == 1 and "2026-11-20" in reads[0]  # the one file of the new hour 02
    expected = by_window(pa.table(DeltaTable(path).to_pyarrow_table()))
    assert store.get("page_traffic").batch_rows.equals(expected)


@pytest.mark.parametrize("partitioned", [True, False])
def test_batch_rows_are_held_in_window_order_whatever_order_their_files_came_in(
    lake: Settings, views: dict[str, ViewDefinition], partitioned: bool
) -> None:
    """A query slices the held rows by binary search on ``window_start``: the files of later
    commits hold earlier hours here, and a table not partitioned by window (an older
    layout) has its rows sorted instead."""
    path = lake.table_path(physical_table("page_traffic", 1))
    store = SnapshotStore(lake, views)
    for hours in ([5, 3], [4], [0, 2, 1]):
        write_deltalake(path, pa.table({
            **view_columns([(h, "/a", h) for h in hours]),
            "run_id": ["run"] * len(hours),
            "bronze_version": pa.array([3] * len(hours), pa.int64()),
            "computed_at": pa.array([MIDNIGHT] * len(hours), TS),
        }), mode="append", partition_by=["window_start"] if partitioned else None)
        store.refresh()
    held = store.get("page_traffic").batch_rows
    assert held.column("views").to_pylist() == [0, 1, 2, 3, 4, 5]
    assert held.equals(by_window(pa.table(DeltaTable(path).to_pyarrow_table())))


def test_the_mark_follows_each_publish_from_its_file_alone_and_after_a_compaction(
    lake: Settings, views: dict[str, ViewDefinition], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish appends one file to the publication log: a refresh takes in that file's
    rows, not the whole log's; once the log was compacted, it is taken in again."""
    publish_hours(lake, 0, 1, 3)
    store = SnapshotStore(lake, views)
    store.refresh()
    assert store.get("page_traffic").high_water_mark == hour(2)
    taken: list[int] = []
    add = HighWaterMarks.add
    monkeypatch.setattr(HighWaterMarks, "add",
                        lambda self, rows: taken.append(len(rows)) or add(self, rows))
    publish_hours(lake, 2)  # fills the gap: the mark jumps over hour 3
    store.refresh()
    assert store.get("page_traffic").high_water_mark == hour(4)
    assert taken == [1]
    store.refresh()  # nothing new
    assert taken == [1]
    compact(lake.table_path(PUBLICATIONS_TABLE))
    publish_hours(lake, 4)
    store.refresh()
    assert store.get("page_traffic").high_water_mark == hour(5)
    assert store.get("funnel").high_water_mark == MIDNIGHT
    assert taken == [1, 5]  # the compacted file's four rows and the new one


def test_filters_time_range_and_pages(lake: Settings, views: dict[str, ViewDefinition]) -> None:
    append_realtime(lake, 0, [(h, p, h) for h in range(5) for p in ("/a", "/b", "/c")])
    store = SnapshotStore(lake, views)
    assert answer(store, views, start="2026-11-20T01:00:00Z", end="2026-11-20T03:00",
                  where=["page=/b"]) == [("01", "/b", 1, "realtime"), ("02", "/b", 2, "realtime")]
    store.refresh()
    snapshot = store.get("page_traffic")
    pages, offset = [], 0
    while offset is not None:
        result = run_query(snapshot, parse_query(views, "page_traffic", limit=4, offset=offset))
        pages.append(len(result.rows))
        offset = result.next_offset
    assert pages == [4, 4, 4, 3]


def test_a_page_carries_where_it_was_read_from(
    lake: Settings, views: dict[str, ViewDefinition]
) -> None:
    write_batch(lake, [(0, "/a", 10)])
    publish_hours(lake, 0)
    store = SnapshotStore(lake, views)
    store.refresh()
    result = run_query(store.get("page_traffic"), parse_query(views, "page_traffic"))
    assert result.rows[0]["as_of"] == "2026-11-20T00:00:00.000Z"  # to the millisecond
    assert result.snapshot["high_water_mark"] == "2026-11-20T01:00:00Z"
    assert result.snapshot["batch"] == {"view_version": 1, "delta_version": 0}
    assert result.snapshot["realtime"]["delta_version"] is None


def test_each_row_says_whether_its_window_is_whole_and_the_rows_it_lacks(
    lake: Settings, views: dict[str, ViewDefinition]
) -> None:
    write_batch(lake, [(0, "/a", 10), (1, "/a", 11)])
    publish_hours(lake, 0, 1)
    append_realtime(lake, 0, [(h, "/a", h) for h in range(2, 6)])
    # the newest look for late rows: 3 rows of hour 1 reached bronze after its publish
    LateArrivals(lake, list(views.values()))._save_answer(
        [Waiting(name, [WaitingWindow(hour(1), rows=3, events=2, computed_from=3)]
                 if name == "page_traffic" else []) for name in views])
    # the speed layer: hours before 05:00 closed, whole from 03:00, 2 rows of 03:00 dropped
    write_status(lake, "speed", {"views": {"page_traffic": {
        "watermark": "2026-11-20T05:00:00.000Z", "complete_from": "2026-11-20T03:00:00.000Z",
        "dropped_by_window": {"2026-11-20T03:00:00.000Z": 2}}}})
    store = SnapshotStore(lake, views)
    store.refresh()

    def rows(**request: object) -> list[tuple[str, str, bool, int]]:
        query = parse_query(views, "page_traffic", **request)  # type: ignore[arg-type]
        return [(r["window_start"][11:13], r["source"], r["complete"], r["late_rows"])
                for r in run_query(store.get("page_traffic"), query).rows]

    assert rows() == [("00", "batch", True, 0),
                      ("01", "batch", False, 3),      # late rows wait for its restatement
                      ("02", "realtime", False, 0),   # before the speed layer is whole
                      ("03", "realtime", False, 2),   # rows dropped as too late
                      ("04", "realtime", True, 0),
                      ("05", "realtime", False, 0)]   # still open
    assert rows(serve_incomplete=False) == [
        ("00", "batch", True, 0), ("01", "batch", False, 3), ("04", "realtime", True, 0)]
    described = run_query(store.get("page_traffic"), parse_query(views, "page_traffic")).snapshot
    assert described["realtime"]["watermark"] == "2026-11-20T05:00:00Z"
    assert described["realtime"]["complete_from"] == "2026-11-20T03:00:00Z"
    write_status(lake, "speed", {"views": {}})  # no watermark: nothing real-time is closed
    store.refresh()
    assert [complete for _, source, complete, _ in rows() if source == "realtime"] == [False] * 4


@pytest.mark.parametrize(("request_", "message"), [
    ({"view_name": "nope"}, "no view 'nope'"),
    ({"where": ["colour=red"]}, "no dimension 'colour'"),
    ({"where": ["page"]}, "is not DIMENSION=VALUE"),
    ({"start": "yesterday"}, "is not an ISO-8601 time"),
    ({"start": "2026-11-20T02:00Z", "end": "2026-11-20T01:00Z"}, "empty time range"),
    ({"limit": 5000}, "limit must be between 1 and 1000"),
    ({"offset": -1}, "offset must be 0 or more"),
])
def test_bad_requests_are_refused_with_what_to_change(
    views: dict[str, ViewDefinition], request_: dict, message: str
) -> None:
    request = {"view_name": "page_traffic", **request_}
    with pytest.raises(QueryError, match=message) as raised:
        parse_query(views, **request)
    assert isinstance(raised.value, UnknownView) == (request["view_name"] == "nope")


def test_values_are_bound_never_interpolated(
    lake: Settings, views: dict[str, ViewDefinition]
) -> None:
    append_realtime(lake, 0, [(0, "/a", 1), (0, "x' OR '1'='1", 2)])
    assert answer(lake_store := SnapshotStore(lake, views), views, where=["page=/a' OR '1'='1"]) == []
    assert answer(lake_store, views, where=["page=x' OR '1'='1"]) == [
        ("00", "x' OR '1'='1", 2, "realtime")]


def test_decimals_stay_exact_in_json() -> None:
    from lambdalake.serving.query import json_value

    assert json_value(Decimal("12.10")) == "12.10"
    assert json_value(datetime(2026, 1, 1, 1, tzinfo=UTC)) == "2026-01-01T01:00:00Z"


def test_the_cli_prints_the_merged_answer_as_a_table_or_json(
    lake: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from lambdalake.cli.data import cmd_query
    from lambdalake.cli.main import build_parser

    write_batch(lake, [(0, "/a", 10)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(1, "/a", 3)])
    base = ["query", "page_traffic", "--from", "2026-11-20", "--where", "page=/a"]
    assert cmd_query(lake, build_parser().parse_args([*base, "--format", "json"])) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["views"], r["source"]) for r in rows] == [(10, "batch"), (3, "realtime")]
    assert cmd_query(lake, build_parser().parse_args(base)) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["window_start", "window_end", "page", "views"]
    assert "batch before 2026-11-20T01:00:00Z" in table[-1]
    assert cmd_query(lake, build_parser().parse_args([*base, "--where", "size=2"])) == 2
    assert "no dimension 'size'" in capsys.readouterr().err


def test_status_shows_each_views_high_water_mark_and_realtime_age(
    lake: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    from lambdalake.cli.main import build_parser
    from lambdalake.cli.stack import cmd_status

    write_batch(lake, [(0, "/a", 10), (3, "/a", 4)])
    publish_hours(lake, 0, 3)
    append_realtime(lake, 0, [(1, "/a", 3)])
    assert cmd_status(lake, build_parser().parse_args(["status"])) == 3  # nothing is running
    lines = capsys.readouterr().out.splitlines()
    [page_traffic] = [line for line in lines if line.startswith("serving page_traffic:")]
    assert ("batch up to 2026-11-20T01:00:00Z and [2026-11-20T03:00:00Z, "
            "2026-11-20T04:00:00Z) (") in page_traffic
    assert "view v1" in page_traffic and "newest real-time row" in page_traffic
    [funnel] = [line for line in lines if line.startswith("serving funnel:")]
    assert "batch up to 2026-11-20T00:00:00Z" in funnel and "no real-time rows" in funnel


def test_instants_are_utc_whatever_the_machines_time_zone() -> None:
    """DuckDB converts instants in its session's time zone: the serving DB's is UTC."""
    import os
    import subprocess
    import sys

    code = ("from lambdalake.serving.snapshot import sql_cursor; print(sql_cursor().execute("
            "\"SELECT CAST(TIMESTAMPTZ '2026-11-20 00:00:00+00' AS TIMESTAMP)\").fetchone()[0])")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "TZ": "America/New_York"}).stdout
    assert shown.strip() == "2026-11-20 00:00:00"
