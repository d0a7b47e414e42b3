"""Speed layer logic that needs no JVM: status reading, batch history and the
supervisor's verdicts."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lambdalake.ingest.service import ensure_ingest_running
from lambdalake.settings import Settings
from lambdalake.speed.shards import APP
from lambdalake.speed.supervisor import check_health, ensure_running
from lambdalake.streaming.progress import (
    consumed_offsets,
    read_history,
    write_status,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from lambdalake.views.definition import ViewDefinition


def test_an_application_of_several_queries_has_consumed_what_its_slowest_query_has() -> None:
    document = {"views": {
        "a": {"end_offsets": {"t:0": 10, "t:1": 7}},
        "b": {"end_offsets": {"t:0": 4, "t:1": 9}},
    }}
    assert consumed_offsets(document) == {"t:0": 4, "t:1": 7}
    assert consumed_offsets({"end_offsets": {"t:0": 3}}) == {"t:0": 3}  # one query (ingest)


def status(lag: int, batch_age: float, now: float) -> dict:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now - batch_age))
    view = {"active": True, "lag": lag, "batch_timestamp": stamp}
    return {"written_at": now, "active": True, "views": {"page_traffic": view}}


def test_the_supervisor_reports_a_stopped_and_a_stale_speed_layer(settings: Settings) -> None:
    now = float(int(time.time()))  # whole seconds, like the stamps below
    health = check_health(settings, now)
    assert not health.healthy and "not running" in health.problems
    assert any("no status" in p for p in health.problems)

    write_status(settings, APP, status(lag=500, batch_age=600, now=now))
    stale = check_health(settings, now)
    assert any("500 records waiting and no batch for 600s" in p for p in stale.problems)

    write_status(settings, APP, status(lag=0, batch_age=600, now=now))
    idle = check_health(settings, now)
    assert idle.problems == ["not running"], "an idle stream with no lag is fresh"


def test_the_lag_of_a_query_counts_once_however_many_views_it_maintains(
    settings: Settings,
) -> None:
    now = float(int(time.time()))
    document = status(lag=500, batch_age=600, now=now)
    shared = {**document["views"]["page_traffic"], "query": "speed_late_600s"}
    document["views"] = {"page_traffic": shared, "funnel": shared,
                         "slow_view": {**shared, "query": "speed_late_3600s", "lag": 7}}
    write_status(settings, APP, document)
    assert check_health(settings, now).lag == 507


def test_a_query_that_failed_is_reported_with_its_cause(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    from lambdalake.operations.status import layer_freshness

    now = float(int(time.time()))
    document = status(lag=0, batch_age=1, now=now)
    document["views"]["page_traffic"].update(
        active=False, query="speed_late_600s", error="java.io.IOException: No space left",
        batch_id=7, watermark=None, dropped_by_watermark_total=0, state_rows=0)
    write_status(settings, APP, document)
    assert "queries stopped: page_traffic (speed_late_600s: java.io.IOException: No space " \
           "left)" in check_health(settings, now).problems
    assert "FAILED speed_late_600s: java.io.IOException: No space left" in layer_freshness(settings)


def test_the_supervisor_alerts_when_lag_keeps_growing(settings: Settings) -> None:
    now = float(int(time.time()))  # whole seconds, like the stamps below
    checks = settings.speed.lag_growth_checks
    verdicts = []
    for lag in range(100, 100 * (checks + 1), 100):
        write_status(settings, APP, status(lag=lag, batch_age=1, now=now))
        verdicts.append(check_health(settings, now).problems)
    assert not any("lag grew" in p for p in verdicts[-2])
    assert any("lag grew" in p for p in verdicts[-1])


def test_alerts_of_the_last_hour_are_what_status_shows(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    from lambdalake.operations.status import layer_freshness
    from lambdalake.speed.supervisor import alerts_path, recent_alerts, record_alert

    record_alert(settings, "real-time quality gate failed", ["gate realtime funnel: FAILED"])
    old = {"at": time.time() - 7200, "what": "speed layer UNHEALTHY", "problems": []}
    with alerts_path(settings).open("a") as alerts:
        alerts.write(json.dumps(old) + "\n")
    [recent] = recent_alerts(settings, within_seconds=3600)
    assert recent["what"] == "real-time quality gate failed"
    shown = "\n".join(layer_freshness(settings))
    assert "real-time quality gate failed\n  gate realtime funnel: FAILED" in shown
    assert "UNHEALTHY" not in shown


def test_under_a_container_orchestrator_the_supervisor_only_checks(settings: Settings) -> None:
    settings.speed.process_manager = "container"
    assert "not started here" in ensure_running(settings)
    assert "not started here" in ensure_ingest_running(settings)
    now = float(int(time.time()))
    write_status(settings, APP, status(lag=0, batch_age=1, now=now))
    assert check_health(settings, now).healthy  # running elsewhere: the fresh status says so


def page_traffic_partials(view: ViewDefinition) -> pa.Table:
    """One key's partials, as Spark's toArrow hands them over (timestamps in the session's
    time zone)."""
    from datetime import UTC, datetime

    import pyarrow as pa

    from lambdalake.views.measures import sketch_of

    hour = datetime(2026, 11, 20, 10, tzinfo=UTC)
    return pa.table({
        "window_start": pa.array([hour], pa.timestamp("us", tz="Etc/UTC")),
        "window_end": pa.array([hour.replace(hour=11)], pa.timestamp("us", tz="Etc/UTC")),
        "page": ["/a"], "views": pa.array([3], pa.int64()),
        "unique_users": pa.array([sketch_of(["u1", "u2"], view.sketch_lg_k)]),
        "unique_sessions": pa.array([sketch_of(["s1", "s2"], view.sketch_lg_k)]),
    })


def test_a_micro_batch_lands_once_however_often_it_is_replayed(settings: Settings) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable

    from lambdalake.speed.realtime import RealtimeTable, realtime_table
    from lambdalake.views.definition import load_views

    view = load_views()["page_traffic"]
    rows = page_traffic_partials(view)
    stream = RealtimeTable(settings, view)
    assert stream.append(rows, "query-1", 0)
    assert not stream.append(rows, "query-1", 0)  # replayed after a crash
    assert not RealtimeTable(settings, view).append(rows, "query-1", 0)  # ... and a restart
    assert not stream.append(rows.slice(0, 0), "query-1", 1)  # nothing touched
    assert stream.append(rows, "query-1", 2)
    assert stream.append(rows, "query-2", 0)  # a new query id: a new sequence
    table = DeltaTable(settings.table_path(realtime_table(view)))
    assert table.transaction_version("query-1") == 2
    written = table.to_pyarrow_table()
    assert sorted(written["batch_id"].to_pylist()) == [0, 0, 2]
    assert written.schema.field("window_start").type == pa.timestamp("us", tz="UTC")
    assert table.metadata().partition_columns == ["window_start"]


def test_an_open_realtime_table_sees_what_others_committed_before_it_appends(
    settings: Settings,
) -> None:
    """The speed layer keeps each table open between micro-batches, while the serving step
    retires rows and (after a restart) another process may have committed a batch."""
    from deltalake import DeltaTable

    from lambdalake.speed.realtime import RealtimeTable, realtime_table
    from lambdalake.views.definition import load_views

    view = load_views()["page_traffic"]
    rows = page_traffic_partials(view)
    stream = RealtimeTable(settings, view)
    assert stream.append(rows, "query-1", 0)  # creates the table
    assert stream.append(rows, "query-1", 1)  # opens it
    uri = settings.table_path(realtime_table(view))
    DeltaTable(uri).delete("batch_id = 0")  # the serving step retires a window
    assert RealtimeTable(settings, view).append(rows, "query-1", 2)  # another writer
    assert not stream.append(rows, "query-1", 2)  # seen: batch 2 committed elsewhere
    assert stream.append(rows, "query-1", 3)
    table = DeltaTable(uri)
    assert sorted(table.to_pyarrow_table()["batch_id"].to_pylist()) == [1, 2, 3]
    assert table.transaction_version("query-1") == 3


def test_an_append_that_loses_a_race_with_a_retirement_is_retried(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalake import DeltaTable

    from lambdalake.speed.realtime import RealtimeTable, realtime_table
    from lambdalake.views.definition import load_views

    view = load_views()["page_traffic"]
    rows = page_traffic_partials(view)
    stream = RealtimeTable(settings, view)
    assert stream.append(rows, "query-1", 0) and stream.append(rows, "query-1", 1)
    uri = settings.table_path(realtime_table(view))
    DeltaTable(uri).delete("batch_id = 0")  # lands between the catch-up and the commit:
    catch_up, missed = DeltaTable.update_incremental, []

    def too_early(table: DeltaTable) -> None:
        if not missed:
            missed.append(table.version())
            return
        catch_up(table)

    monkeypatch.setattr(DeltaTable, "update_incremental", too_early)
    assert stream.append(rows, "query-1", 2)
    assert missed
    assert sorted(DeltaTable(uri).to_pyarrow_table()["batch_id"].to_pylist()) == [1, 2]


def test_a_batch_announced_by_an_idle_report_is_still_recorded(settings: Settings) -> None:
    """While a query idles, Spark reports the id of the next batch with no rows; when that
    batch then runs with data, it must be recorded all the same."""
    from lambdalake.streaming.progress import QuerySnapshot, record_batches

    def report(batch: int, rows: int) -> dict:
        return {"batchId": batch, "numInputRows": rows, "timestamp": "2026-11-22T13:01:00.000Z",
                "durationMs": {"triggerExecution": 10}, "sources": [{
                    "endOffset": {"events": {"0": 100 * batch, "1": 50}},
                    "latestOffset": {"events": {"0": 100 * batch + 7, "1": 52}}}]}

    recorded: dict[str, int] = {}
    polls = [[report(2, 500)], [report(3, 0)], [report(3, 0)], [report(3, 800)],
             [report(3, 800), report(4, 0)]]
    new = [record_batches(settings, APP, [QuerySnapshot("speed_late_600s", "run", True, poll)],
                          recorded) for poll in polls]
    assert [[entry["batch_id"] for entry in batch] for batch in new] == [[2], [], [], [3], []]
    history = read_history(settings, APP)
    assert [(e["batch_id"], e["input_rows"]) for e in history] == [(2, 500), (3, 800)]
    assert [e["lag"] for e in history] == [9, 9]  # 7 + 2 records left in Kafka after each


def test_a_realtime_table_of_an_earlier_format_is_refused_and_reset_rebuilds(
    settings: Settings,
) -> None:
    import os

    import psutil
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from lambdalake.operations.reset import reset_speed_layer
    from lambdalake.speed.realtime import RealtimeFormatError, check_format, realtime_table
    from lambdalake.streaming.service import app_process
    from lambdalake.views.definition import load_views

    view = load_views()["page_traffic"]
    table = settings.table_path(realtime_table(view))
    write_deltalake(table, pa.table({"views": [3], "unique_users": [2], "unique_sessions": [2]}))
    with pytest.raises(RealtimeFormatError, match="unique_users, unique_sessions are numbers"):
        check_format(settings, [view])
    check_format(settings, [load_views()["product_sales"]])  # no distinct counts, no table

    checkpoints = Path(settings.checkpoint_path(""))
    for query in ("speed_page_traffic", "speed_late_600s", "ingest"):
        (checkpoints / query / "offsets").mkdir(parents=True)
    write_status(settings, APP, {"views": {}})
    process = app_process(settings, APP)  # this test's process, posing as a running speed layer
    process.run_dir.mkdir(parents=True)
    process.pid_file.write_text(json.dumps(
        {"pid": os.getpid(), "create_time": psutil.Process().create_time()}))
    with pytest.raises(RuntimeError, match="stop speed first"):
        reset_speed_layer(settings)
    assert DeltaTable.is_deltatable(table), "nothing removed while it runs"

    process.pid_file.unlink()
    removed = reset_speed_layer(settings)
    assert sorted(Path(p).name for p in removed) == [
        "realtime_page_traffic", "speed.json", "speed_late_600s", "speed_page_traffic"]
    assert sorted(p.name for p in checkpoints.iterdir()) == ["ingest"]
    assert not DeltaTable.is_deltatable(table)
    assert reset_speed_layer(settings) == []  # nothing left to remove
