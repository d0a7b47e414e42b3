"""The real-time gate on small real-time tables written with delta-rs (no JVM): what it
checks, that each row is gated once, and that a gate that did not run never passes."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lambdalake.quality import gate, realtime_gate
from lambdalake.quality.history import read_results
from lambdalake.quality.realtime_gate import gated_until, run_realtime_gates, validate_realtime
from lambdalake.settings import Settings
from lambdalake.speed.realtime import realtime_table
from lambdalake.views.definition import ViewDefinition, load_views
from lambdalake.views.measures import sketch_of
from tests.support.serving_tables import TS, append_realtime, hour
from tests.support.settings_factory import MakeSettings

NOW = hour(6)


@pytest.fixture
def lake(make_settings: MakeSettings) -> Settings:
    return make_settings(batch={"start_date": date(2026, 11, 20)})


@pytest.fixture
def page_traffic() -> ViewDefinition:
    return load_views()["page_traffic"]


def failed_checks(result: realtime_gate.GateResult) -> dict[str, int | None]:
    return {o.check: o.unexpected_count for o in result.critical_failures}


def test_good_rows_pass_and_each_row_is_gated_once(
    lake: Settings, page_traffic: ViewDefinition
) -> None:
    append_realtime(lake, 0, [(0, "/a", 1), (1, "/a", 2)])
    append_realtime(lake, 1, [(1, "/a", 3), (2, "/b", 1)])  # 01:00 /a again: another partial
    first = validate_realtime(lake, page_traffic, now=NOW)
    assert first is not None and first.success, first.report()
    assert (first.layer, first.rows, first.evaluated) == ("realtime", 4, 16)
    assert (first.start, first.end) == (hour(0), hour(2) + timedelta(minutes=1, seconds=1))
    assert validate_realtime(lake, page_traffic, now=NOW) is None  # nothing new
    append_realtime(lake, 3, [(3, "/a", 1)])
    second = validate_realtime(lake, page_traffic, now=NOW)
    assert second is not None and second.success and second.rows == 1
    assert second.interval == "[2026-11-20 03:03:00, 2026-11-20 03:03:01)"  # one write
    assert gated_until(lake) == {"page_traffic": {0: hour(3) + timedelta(minutes=3)}}


def test_bad_rows_fail_naming_each_broken_rule(
    lake: Settings, page_traffic: ViewDefinition
) -> None:
    append_realtime(lake, 1, [(2, "/a", 1), (2, "/a", -2), (9, "/b", 1)])
    misaligned = hour(3) + timedelta(minutes=30)
    write_deltalake(lake.table_path(realtime_table(page_traffic)), pa.table({
        "window_start": pa.array([misaligned], TS),
        "window_end": pa.array([misaligned + timedelta(hours=1)], TS),
        "page": ["/c"], "views": pa.array([1], pa.int64()),
        "unique_users": pa.array([sketch_of(["user-1"], page_traffic.sketch_lg_k)]),
        "unique_sessions": pa.array([None], pa.binary()),
        "batch_id": pa.array([2], pa.int64()), "shard": pa.array([0], pa.int32()),
        "updated_at": pa.array([hour(4)], TS),
    }), partition_by=["window_start"], mode="append")
    result = validate_realtime(lake, page_traffic, now=NOW)
    assert result is not None and not result.success
    assert failed_checks(result) == {
        "unique:window_start,page,shard,batch_id": 2,  # a micro-batch wrote a key twice
        "range:views": 1,                          # a negative count
        "not_future:window_start": 1,              # 09:00 starts after NOW + one hour
        "window": 1,                               # 03:30 is not aligned to the hour
        "not_null:unique_sessions": 1,
    }
    window = next(o for o in result.critical_failures if o.check == "window")
    assert window.samples == ["2026-11-20 03:30:00 .. 2026-11-20 04:30:00"]  # as Spark
    assert validate_realtime(lake, page_traffic, now=NOW) is None  # reported once


def test_rows_of_two_shards_are_each_gated_once_whatever_order_their_stamps_commit_in(
    lake: Settings, page_traffic: ViewDefinition
) -> None:
    """Each shard stamps its own appends: shard 1's rows may be stamped before shard 0's and
    commit after the gate took shard 0's. The same micro-batch number of two shards is two
    micro-batches."""
    lake.speed.shards = 2
    append_realtime(lake, 4, [(0, "/a", 1)], shard=0, written_at=hour(5))
    append_realtime(lake, 4, [(0, "/a", 2)], shard=1, written_at=hour(4))
    first = validate_realtime(lake, page_traffic, now=NOW)
    assert first is not None and first.success and first.rows == 2, first and first.report()
    append_realtime(lake, 5, [(0, "/a", 3)], shard=1, written_at=hour(4) + timedelta(minutes=1))
    late = validate_realtime(lake, page_traffic, now=NOW)
    assert late is not None and late.success and late.rows == 1, "stamped before shard 0's"
    assert validate_realtime(lake, page_traffic, now=NOW) is None
    assert gated_until(lake) == {"page_traffic": {0: hour(5), 1: hour(4) + timedelta(minutes=1)}}


def test_a_mark_from_before_shards_is_shard_zeros(
    lake: Settings, page_traffic: ViewDefinition
) -> None:
    realtime_gate._write_marks(lake, {"views": {"page_traffic": hour(2).isoformat()}})
    assert gated_until(lake) == {"page_traffic": {0: hour(2)}}
    append_realtime(lake, 1, [(1, "/a", 1), (3, "/a", 1)])  # written at 01:01 and 03:01
    result = validate_realtime(lake, page_traffic, now=NOW)
    assert result is not None and result.success and result.rows == 1


def test_the_newest_rows_are_gated_when_too_many_were_written(
    lake: Settings, page_traffic: ViewDefinition, caplog: pytest.LogCaptureFixture
) -> None:
    for batch_id in range(5):
        append_realtime(lake, batch_id, [(0, "/a", batch_id + 1)])
    result = validate_realtime(lake, page_traffic, now=NOW, max_rows=2)
    assert "page_traffic: gating the newest 2 of 5 rows written since None" in caplog.text
    assert result is not None and result.success and result.rows == 2
    assert (result.start, result.end) == (hour(0) + timedelta(minutes=3),
                                          hour(0) + timedelta(minutes=4, seconds=1))


def test_a_gate_that_did_not_run_fails_and_keeps_its_rows_for_the_next_round(
    lake: Settings, page_traffic: ViewDefinition, monkeypatch: pytest.MonkeyPatch
) -> None:
    append_realtime(lake, 0, [(0, "/a", 1)])

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("GX blew up")

    monkeypatch.setattr(gate, "validate_in_two_passes", broken)
    result = validate_realtime(lake, page_traffic, now=NOW)
    assert result is not None and not result.success
    assert "GX blew up" in (result.critical_failures[0].error or "")
    assert gated_until(lake) == {}
    monkeypatch.undo()
    retried = validate_realtime(lake, page_traffic, now=NOW)
    assert retried is not None and retried.success and retried.rows == 1


def test_a_round_records_every_verdict_and_runs_at_most_every_gate_interval(
    lake: Settings, page_traffic: ViewDefinition
) -> None:
    views = load_views().values()
    assert run_realtime_gates(lake, views, now=NOW, run_id="r1") == []  # no real-time rows
    append_realtime(lake, 0, [(0, "/a", 1)])
    assert run_realtime_gates(lake, views, now=NOW + timedelta(seconds=1)) is None  # not due
    later = NOW + timedelta(seconds=lake.speed.gate_every_seconds)
    [result] = run_realtime_gates(lake, views, now=later, run_id="r2") or []
    assert result.subject == "page_traffic" and result.success
    [recorded] = read_results(lake)
    assert (recorded["layer"], recorded["subject"], recorded["run_id"]) == (
        "realtime", "page_traffic", "r2")
    assert recorded["docs"].endswith(".html")


def test_the_gate_reads_no_rows_before_the_first_write(
    lake: Settings, page_traffic: ViewDefinition
) -> None:
    assert validate_realtime(lake, page_traffic, now=datetime.now(NOW.tzinfo)) is None
