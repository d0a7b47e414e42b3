"""The batch layer: recompute a view's slice for an event-time interval from bronze.

A batch view is a pure function of bronze: the interval's events (however late they
arrived), one row per ``event_id`` (the first copy that reached Kafka), aggregated with the
view's one definition. The result replaces the interval's slice of the view's Delta table
(``replaceWhere``), so a re-run or a backfill replaces rows and never appends. Bronze is
read at a pinned version, recorded in the slice's lineage with the run id and the time.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from lambdalake.lake.bronze import BRONZE_TABLE, read_bronze_interval
from lambdalake.settings import Settings
from lambdalake.views.aggregate import aggregate
from lambdalake.views.definition import ViewDefinition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class SliceWritten:
    view: str
    start: datetime
    end: datetime
    rows: int
    bronze_version: int
    table_version: int


def check_interval(view: ViewDefinition, start: datetime, end: datetime) -> None:
    """An interval must be non-empty, in UTC and aligned to the view's grain."""
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("interval bounds must be timezone-aware (UTC)")
    if start.utcoffset() or end.utcoffset():
        raise ValueError("interval bounds must be in UTC (offset +00:00)")
    if end <= start:
        raise ValueError(f"empty interval [{start}, {end})")
    for bound in (start, end):
        if bound.timestamp() % view.grain_seconds:
            raise ValueError(f"{bound.isoformat()} is not aligned to {view.name}'s grain "
                             f"({view.grain})")


def first_copies(events: DataFrame) -> DataFrame:
    """One row per ``event_id``: the copy with the lowest Kafka coordinates (deterministic)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy("event_id").orderBy("kafka_timestamp", "topic", "partition",
                                                   "offset")
    return events.withColumn("_copy", F.row_number().over(first)).where("_copy = 1").drop("_copy")


def compute_slice(
    spark: SparkSession, settings: Settings, view: ViewDefinition, start: datetime,
    end: datetime, bronze_version: int,
) -> DataFrame:
    """The view's rows for [start, end) from bronze at ``bronze_version`` (no lineage)."""
    events = read_bronze_interval(spark, settings, start, end, version=bronze_version)
    return aggregate(first_copies(events), view, exact=True)


def recompute_slice(
    spark: SparkSession, settings: Settings, view: ViewDefinition, start: datetime,
    end: datetime, run_id: str,
) -> SliceWritten:
    """Replace the view's slice for [start, end) with a fresh computation from bronze."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    check_interval(view, start, end)
    bronze_version = int(
        DeltaTable.forPath(spark, settings.table_path(BRONZE_TABLE)).history(1)
        .collect()[0]["version"]
    )
    rows = compute_slice(spark, settings, view, start, end, bronze_version).withColumns({
        "window_date": F.to_date("window_start"),
        "run_id": F.lit(run_id),
        "bronze_version": F.lit(bronze_version).cast("bigint"),
        "computed_at": F.lit(datetime.now(UTC)).cast("timestamp"),
    }).persist()
    try:
        count = rows.count()
        predicate = (f"window_start >= '{_sql_time(start)}' AND "
                     f"window_start < '{_sql_time(end)}'")
        (
            rows.write.format("delta").mode("overwrite")
            .option("replaceWhere", predicate)
            .partitionBy("window_date")
            .save(settings.table_path(view.table))
        )
    finally:
        rows.unpersist()
    table_version = int(
        DeltaTable.forPath(spark, settings.table_path(view.table)).history(1).collect()[0]["version"]
    )
    return SliceWritten(view.name, start, end, count, bronze_version, table_version)


def recompute_interval(
    spark: SparkSession, settings: Settings, view: ViewDefinition, start: datetime,
    end: datetime, run_id: str,
) -> Iterator[SliceWritten]:
    """Recompute every grain-aligned slice of [start, end), oldest first."""
    check_interval(view, start, end)
    step = timedelta(seconds=view.grain_seconds)
    slice_start = start
    while slice_start < end:
        yield recompute_slice(spark, settings, view, slice_start, slice_start + step, run_id)
        slice_start += step


def _sql_time(moment: datetime) -> str:
    """A UTC timestamp literal (the session time zone is UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
