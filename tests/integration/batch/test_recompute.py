"""Batch views equal an independent pandas computation over the same bronze rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest

from lambdalake.batch.recompute import check_interval
from lambdalake.batch.written import SliceWritten
from lambdalake.contracts.registry import ContractRegistry
from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile
from lambdalake.lake.bronze import BRONZE_TABLE, write_micro_batch
from lambdalake.lake.ledger import BatchLedger
from lambdalake.quality.slices import gate_staged_slice
from lambdalake.settings import Settings
from lambdalake.streaming.classification import classify
from lambdalake.views.catalog import current_table_path
from lambdalake.views.definition import ViewDefinition, load_views
from tests.support.batch_runs import stage_and_promote
from tests.support.ground_truth import expected_view, first_copies, row_differences

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# fixed date: the Kafka rows are built here, stamped ARRIVAL (no producing: no age check
# against now), and the slices are computed for intervals the tests name
START = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
ARRIVAL = START + timedelta(hours=3)
KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT")


def ingest(spark: SparkSession, lake: Settings, records: list, first_offset: int, batch: int) -> None:
    rows = [(r.key, r.value, "events", i % 3, first_offset + i, ARRIVAL.replace(tzinfo=None), 0)
            for i, r in enumerate(records)]
    frame = spark.createDataFrame(rows, KAFKA_SCHEMA)
    contracts = ContractRegistry()
    write_micro_batch(classify(frame, contracts, lake.ingest), lake, contracts, BatchLedger("test"),
                       batch)


@pytest.fixture(scope="module")
def lake(spark: SparkSession, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    root = tmp_path_factory.mktemp("views")
    lake = settings.model_copy(update={"lake": settings.lake.model_copy(update={"root": str(root)})})
    profile = TrafficProfile(count=6000, seed=77, start_time=START, event_time_rate=6000 / 7200,
                             late_fraction=0.1, max_lateness_minutes=45, duplicate_fraction=0.05,
                             malformed_fraction=0.02, users=200, pages=8, products=12)
    ingest(spark, lake, list(TrafficGenerator(profile).records()), 0, 0)
    return lake


def actual_view(spark: SparkSession, lake: Settings, view: ViewDefinition) -> pd.DataFrame:
    table = spark.read.format("delta").load(current_table_path(lake, view.name))
    columns = ["window_start", *view.dimensions, *(m.name for m in view.measures)]
    return table.select(*columns).toPandas()


@pytest.mark.parametrize("view_name", ["page_traffic", "product_sales", "funnel", "order_value"])
def test_batch_view_equals_an_independent_computation(
    spark: SparkSession, lake: Settings, view_name: str
) -> None:
    view = load_views()[view_name]
    end = START + timedelta(hours=2)
    stage_and_promote(spark, lake, [view], START, START + timedelta(hours=1), "run-1")
    stage_and_promote(spark, lake, [view], START + timedelta(hours=1), end, "run-1")
    bronze = spark.read.format("delta").load(lake.table_path(BRONZE_TABLE)).toPandas()
    expected = expected_view(first_copies(bronze), view, START, end)
    actual = actual_view(spark, lake, view)
    assert len(actual) > 10
    assert row_differences(view, expected, actual) == {}


def page_views(spark: SparkSession, lake: Settings, view: ViewDefinition, hour: datetime,
               page: str) -> int:
    rows = (spark.read.format("delta").load(current_table_path(lake, view.name))
            .where(f"window_start = '{hour:%Y-%m-%d %H:%M:%S}' AND page = '{page}'")
            .select("views").collect())
    return rows[0].views if rows else 0


def test_a_rerun_replaces_the_slice_and_a_late_event_is_included(
    spark: SparkSession, lake: Settings
) -> None:
    view = load_views()["page_traffic"]
    hour = START + timedelta(hours=1)
    [first] = stage_and_promote(spark, lake, [view], hour, hour + timedelta(hours=1), "run-a")
    [again] = stage_and_promote(spark, lake, [view], hour, hour + timedelta(hours=1), "run-b")
    table = spark.read.format("delta").load(current_table_path(lake, view.name))
    slice_rows = table.where(f"window_start = '{hour:%Y-%m-%d %H:%M:%S}'")
    assert again.rows == first.rows == slice_rows.count()  # replaced, not appended
    assert {r.run_id for r in slice_rows.select("run_id").collect()} == {"run-b"}

    views_before = page_views(spark, lake, view, hour, "/page/0")
    late_view = next(
        r for r in TrafficGenerator(TrafficProfile(
            count=50, seed=1, start_time=hour + timedelta(minutes=30), malformed_fraction=0,
            duplicate_fraction=0, late_fraction=0, pages=1)).records()
        if r.event["event_type"] == "page_view"
    )
    ingest(spark, lake, [late_view], first_offset=10_000, batch=1)  # arrives after the run
    assert page_views(spark, lake, view, hour, "/page/0") == views_before
    # a run whose bronze gate validated the version before it computes that version only
    [pinned] = stage_and_promote(spark, lake, [view], hour, hour + timedelta(hours=1),
                               "run-pinned", bronze_version=first.bronze_version)
    assert pinned.bronze_version == first.bronze_version
    assert page_views(spark, lake, view, hour, "/page/0") == views_before
    stage_and_promote(spark, lake, [view], hour, hour + timedelta(hours=1), "run-c")
    assert page_views(spark, lake, view, hour, "/page/0") == views_before + 1



def test_an_interval_with_more_events_than_the_step_may_collect_is_written_by_spark(
    spark: SparkSession, lake: Settings
) -> None:
    from deltalake import DeltaTable

    from lambdalake.batch.recompute import stage_views
    from lambdalake.batch.staging import promote_run, staging_path

    view = load_views()["product_sales"]
    first, second = START, START + timedelta(hours=1)
    for hour in (first, second):
        stage_and_promote(spark, lake, [view], hour, hour + timedelta(hours=1), "collected")
    path = current_table_path(lake, view.name)
    collected = actual_view(spark, lake, view)

    def recompute(max_rows: int, run_id: str) -> tuple[int, dict[str, Any]]:
        limited = lake.model_copy(update={"batch": lake.batch.model_copy(
            update={"local_write_max_rows": max_rows})})
        end = second + timedelta(hours=1)
        [written] = stage_views(spark, limited, [view], second, end, run_id)
        [commit] = DeltaTable(staging_path(limited, view.name, run_id, second, end)).history(1)
        promote_run(limited, run_id, second, end, {view.name: written.bronze_version})
        return written.rows, commit

    rows, commit = recompute(10, "on-spark")  # more events and more rows than 10
    assert "Apache-Spark" in str(commit.get("engineInfo")) and commit["operation"] == "WRITE"
    table = spark.read.format("delta").load(path)
    assert row_differences(view, collected, actual_view(spark, lake, view)) == {}
    run_ids = {(r.window_start.hour, r.run_id) for r in table.select("window_start", "run_id")
               .distinct().collect()}  # the other hour's slice is untouched
    assert run_ids == {(first.hour, "collected"), (second.hour, "on-spark")}
    assert rows == table.where("run_id = 'on-spark'").count() > 10
    # more events than that, but no more rows: counted, then collected and written by delta-rs
    rows_counted, commit = recompute(rows, "counted")
    assert rows_counted == rows and "delta-rs" in str(commit.get("clientVersion"))
    assert row_differences(view, collected, actual_view(spark, lake, view)) == {}


def test_intervals_must_be_utc_and_align_to_the_grain() -> None:
    from datetime import timezone

    view = load_views()["page_traffic"]
    with pytest.raises(ValueError, match="not aligned"):
        check_interval(view, START + timedelta(minutes=5), START + timedelta(hours=1))
    with pytest.raises(ValueError, match="not aligned"):
        check_interval(view, START + timedelta(microseconds=500), START + timedelta(hours=1))
    with pytest.raises(ValueError, match="timezone-aware"):
        check_interval(view, START.replace(tzinfo=None), START + timedelta(hours=1))
    plus_two = timezone(timedelta(hours=2))
    with pytest.raises(ValueError, match="in UTC"):
        check_interval(view, START.astimezone(plus_two), START.astimezone(plus_two)
                       + timedelta(hours=1))


def test_the_reader_filters_days_in_utc(spark: SparkSession, lake: Settings) -> None:
    from datetime import timezone

    from lambdalake.lake.bronze import read_bronze_interval

    hour = START + timedelta(hours=1)
    in_utc = read_bronze_interval(spark, lake, hour, hour + timedelta(hours=1)).count()
    minus_eleven = timezone(timedelta(hours=-11))  # the same instants, the previous local day
    local = read_bronze_interval(spark, lake, hour.astimezone(minus_eleven),
                                 (hour + timedelta(hours=1)).astimezone(minus_eleven)).count()
    assert local == in_utc > 0


def test_the_batch_entry_point_runs_as_airflow_will_run_it(lake: Settings) -> None:
    import os
    import subprocess
    import sys

    from lambdalake.orchestration.spark_jobs import job_path

    result = subprocess.run(
        [sys.executable, str(job_path("batch_views")), "stage", "--start", "2026-11-20T10:00:00Z",
         "--end", "2026-11-20T12:00:00Z", "--views", "funnel", "--run-id", "cli-1"],
        env={**os.environ, **lake.to_environment()}, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [said] = [line for line in result.stdout.splitlines() if line.startswith("batch: funnel ")]
    assert said.startswith("batch: funnel [2026-11-20 10:00, 2026-11-20 12:00): ")
    assert " rows from bronze's Delta version " in said and said.endswith(
        " into the run's staging table for view version 1, now at Delta version 0")
    from deltalake import DeltaTable

    from lambdalake.batch.staging import staging_path

    staged = DeltaTable(staging_path(lake, "funnel", "cli-1", START, START + timedelta(hours=2)))
    assert set(staged.to_pyarrow_table(columns=["run_id"]).column("run_id").to_pylist()) == {
        "cli-1"}
    served = current_table_path(lake, "funnel")  # staged: no reader sees it
    assert not DeltaTable.is_deltatable(served) or "cli-1" not in DeltaTable(
        served).to_pyarrow_table(columns=["run_id"]).column("run_id").to_pylist()
    bad = subprocess.run(
        [sys.executable, str(job_path("batch_views")), "stage", "--start", "2026-11-20T10:00:00Z",
         "--end", "2026-11-20T12:00:00Z", "--views", "nope"],
        env={**os.environ, **lake.to_environment()}, capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2 and "unknown views ['nope']" in bad.stderr


def total_views(lake: Settings) -> int:
    """What a reader sees: page_traffic's current version for START's two hours, read
    without Spark."""
    from deltalake import DeltaTable

    rows = DeltaTable(current_table_path(lake, "page_traffic")).to_pyarrow_table(
        columns=["window_start", "views"]).to_pylist()
    two_hours = (START, START + timedelta(hours=2))
    return sum(r["views"] for r in rows
               if two_hours[0] <= r["window_start"].replace(tzinfo=UTC) < two_hours[1])


def test_intervals_of_one_day_are_written_in_parallel_without_conflicts(
    spark: SparkSession, lake: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from lambdalake.batch import staging

    monkeypatch.setattr(staging, "retry_on_conflict", lambda write: write())  # no retry allowed
    view = load_views()["page_traffic"]
    hours = [START + timedelta(hours=h) for h in range(2)]
    with ThreadPoolExecutor(2) as pool:
        written = list(pool.map(
            lambda h: stage_and_promote(spark, lake, [view], h, h + timedelta(hours=1), "par"), hours))
    assert [w.start for [w] in written] == hours and all(w.rows > 0 for [w] in written)


def page_views_at(moment: datetime, count: int, seed: int) -> list:
    """``count`` new page-view records whose event time is a few minutes after ``moment``."""
    records = TrafficGenerator(TrafficProfile(
        count=count * 4, seed=seed, start_time=moment, event_time_rate=100.0,
        malformed_fraction=0, duplicate_fraction=0, late_fraction=0)).records()
    return [r for r in records if r.event["event_type"] == "page_view"][:count]


def test_a_full_reprocess_switches_readers_atomically_and_keeps_newer_slices(
    spark: SparkSession, lake: Settings
) -> None:
    import threading

    from lambdalake.batch.recompute import build_version, switch_to
    from lambdalake.batch.staging import staging_path
    from lambdalake.quality.history import read_results
    from lambdalake.views.catalog import current_version, physical_table

    view = load_views()["page_traffic"]
    second_hour = START + timedelta(hours=1)
    gated: list[tuple[datetime, str, bool]] = []

    def gate(written: SliceWritten, staged: str) -> bool:  # the real gate, watched
        result = gate_staged_slice(spark, lake, view, staged, written.start, written.end,
                                   written.bronze_version, "reprocess")
        gated.append((written.start, staged, result.success))
        return result.success

    stage_and_promote(spark, lake, [view], START, START + timedelta(hours=2), "before")
    old_version, old_total = current_version(lake, view.name), total_views(lake)
    ingest(spark, lake, page_views_at(START, 10, seed=11) + page_views_at(second_hour, 100, 12),
           first_offset=20_000, batch=2)
    seen: set[int] = set()
    stop = threading.Event()

    def read_in_a_loop() -> None:
        while not stop.is_set():
            seen.add(total_views(lake))

    reader = threading.Thread(target=read_in_a_loop)
    reader.start()
    try:
        built = build_version(spark, lake, view, "reprocess")
        assert built.view_version == old_version + 1
        assert current_version(lake, view.name) == old_version  # invisible until the switch
        # meanwhile a scheduled run recomputes the first hour of the old version, late event included
        ingest(spark, lake, page_views_at(START, 1, seed=13), first_offset=30_000, batch=3)
        stage_and_promote(spark, lake, [view], START, second_hour, "scheduled")
        carried = switch_to(spark, lake, view, built.view_version, "reprocess", gate)
    finally:
        stop.set()
        reader.join()
    assert current_version(lake, view.name) == built.view_version
    assert [c.start for c in carried] == [START]  # the slice the scheduled run rewrote
    # gated where it was staged before it was copied, and the verdict is in the history
    assert gated == [(START, staging_path(lake, view.name, "reprocess:carried", START,
                                          second_hour), True)]
    assert [(r["subject"], r["start"], r["success"]) for r in read_results(lake)
            if r.get("run_id") == "reprocess"] == [(view.name, START.isoformat(), True)]
    assert total_views(lake) == old_total + 111  # new version, with the late event carried over
    old_path = lake.table_path(physical_table(view.name, old_version))
    assert spark.read.format("delta").load(old_path).count() > 0  # the old version stays
    # old version (before / after the scheduled run), new version (built / carried over);
    # a reader mixing versions would see old_total + 100 (new second hour, old first hour)
    assert seen <= {old_total, old_total + 11, old_total + 110, old_total + 111}
    assert len(seen) >= 2


def test_a_full_reprocess_whose_carried_slice_fails_its_gate_does_not_switch(
    spark: SparkSession, lake: Settings
) -> None:
    """A slice published into the current version after a new one was built is carried
    over only through its gate: rejected, readers stay on the current version, unchanged."""
    from lambdalake.batch.recompute import CarriedSliceRejected, build_version, switch_to
    from lambdalake.views.catalog import current_version

    view = load_views()["page_traffic"]
    built = build_version(spark, lake, view, "reprocess-2")
    ingest(spark, lake, page_views_at(START, 1, seed=14), first_offset=40_000, batch=4)
    stage_and_promote(spark, lake, [view], START, START + timedelta(hours=1), "scheduled-2")
    before, served = current_version(lake, view.name), total_views(lake)
    rejected: list[datetime] = []

    def reject(written: SliceWritten, staged: str) -> bool:
        rejected.append(written.start)
        return False

    with pytest.raises(CarriedSliceRejected, match="failed its gate"):
        switch_to(spark, lake, view, built.view_version, "reprocess-2", reject)
    assert rejected == [START]
    assert current_version(lake, view.name) == before != built.view_version
    assert total_views(lake) == served
