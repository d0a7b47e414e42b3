"""The batch layer: recompute views for an event-time interval from bronze.

A batch view is a pure function of bronze: the interval's events (however late they
arrived), one row per ``event_id`` (the first copy that reached Kafka), aggregated with the
view's one definition. Bronze is read once per run at a pinned version and deduplicated
once for all views. Each view's rows for [start, end) replace that slice of the view's
current table in one commit (``write_slice``), so a re-run or a backfill replaces rows and
never appends; every row carries its lineage (run id, bronze version, computed-at).

View tables are partitioned by ``window_start``: runs for different intervals write
disjoint partitions, so parallel backfills never conflict, and none of them touches bronze,
which the ingest stream appends to. A *full reprocess* builds a new version of a view from
all of bronze beside the current one; ``switch_to`` then moves readers to it atomically
(``lambdalake.views.catalog``) and recomputes, in the new version, the slices that
scheduled runs wrote to the old one in the meantime.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lambdalake.batch.written import SliceWritten
from lambdalake.lake.bronze import BRONZE_TABLE, read_bronze_interval
from lambdalake.lake.commits import retry_on_conflict
from lambdalake.lake.delta_rs import delta_rs_uri, table_exists, table_version
from lambdalake.lake.reference import read_versions
from lambdalake.settings import Settings
from lambdalake.views.aggregate import aggregate
from lambdalake.views.catalog import current_version, physical_table, switch_version
from lambdalake.views.definition import ViewDefinition
from lambdalake.views.enrichment import as_of_event_time

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

LINEAGE_COLUMNS = ("run_id", "bronze_version", "computed_at")


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


KAFKA_ORDER = ["kafka_timestamp", "topic", "partition", "offset"]
"""Which copy of a duplicated event is the first: the one that reached Kafka first."""


def first_copies(events: DataFrame) -> DataFrame:
    """One row per ``event_id``: the copy with the lowest Kafka coordinates (deterministic)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy("event_id").orderBy(*KAFKA_ORDER)
    return events.withColumn("_copy", F.row_number().over(first)).where("_copy = 1").drop("_copy")


def compute_slice(
    spark: SparkSession, settings: Settings, view: ViewDefinition, start: datetime,
    end: datetime, bronze_version: int,
) -> DataFrame:
    """The view's rows for [start, end) from bronze at ``bronze_version`` (no lineage)."""
    events = read_bronze_interval(spark, settings, start, end, version=bronze_version)
    return aggregate_enriched(spark, settings, first_copies(events), view, (start, end))


def aggregate_enriched(spark: SparkSession, settings: Settings, events: DataFrame,
                       view: ViewDefinition, during: tuple[datetime, datetime] | None = None
                       ) -> DataFrame:
    """The view's rows over deduplicated ``events`` (of event time ``during``, if known),
    its joins made as of event time."""
    if view.joins:
        events = as_of_event_time(events, view, lambda join: read_versions(
            spark, settings, join.entity, join.attributes), during)
    return aggregate(events, view)


def with_lineage(rows: DataFrame, run_id: str, bronze_version: int) -> DataFrame:
    from pyspark.sql import functions as F

    return rows.withColumns({
        "run_id": F.lit(run_id),
        "bronze_version": F.lit(bronze_version).cast("bigint"),
        "computed_at": F.lit(datetime.now(UTC)).cast("timestamp"),
    })


def recompute_views(
    spark: SparkSession, settings: Settings, views: Sequence[ViewDefinition], start: datetime,
    end: datetime, run_id: str, bronze_version: int | None = None,
) -> list[SliceWritten]:
    """Replace every view's slice [start, end) with a fresh computation from bronze at
    ``bronze_version`` (default: its newest).

    The views run at the same time (``batch.views_at_once``), on one cache of the
    interval's deduplicated events: an hour's Spark jobs are short, so one at a time leaves
    the server mostly waiting on planning and commits. Each view's write is its own commit,
    as before; a failed view fails the step, and its retry rewrites every slice."""
    from pyspark import StorageLevel

    for view in views:
        check_interval(view, start, end)
    if bronze_version is None:
        bronze_version = table_version(settings.table_path(BRONZE_TABLE))
    events = read_bronze_interval(spark, settings, start, end, version=bronze_version)
    columns = view_columns(views)
    events = (  # cache only what the views read: no raw bytes, no ids once deduplicated
        first_copies(events.select(*sorted({*columns, "event_id", *KAFKA_ORDER})))
        .select(*columns).persist(StorageLevel.MEMORY_AND_DISK)
    )
    # a view has at most a row per event (tumbling windows): with few events, every slice
    # fits in the step's memory without counting it first
    few_events = events.count() <= settings.batch.local_write_max_rows

    def recompute(view: ViewDefinition) -> SliceWritten:
        rows = aggregate_enriched(spark, settings, events, view, (start, end))
        return write_slice(settings, view, start, end,
                           with_lineage(rows, run_id, bronze_version), bronze_version,
                           count_first=not few_events)

    try:
        with ThreadPoolExecutor(settings.batch.views_at_once, "recompute") as pool:
            return list(pool.map(recompute, views))
    finally:
        events.unpersist()


def view_columns(views: Sequence[ViewDefinition]) -> list[str]:
    """The bronze columns these views read."""
    columns = {"event_type"}
    for view in views:
        columns |= set(view.event_columns)
    return sorted(columns)


def write_slice(
    settings: Settings, view: ViewDefinition, start: datetime, end: datetime,
    rows: DataFrame, bronze_version: int, *, count_first: bool = False,
) -> SliceWritten:
    """Replace [start, end) of the view's current table with ``rows``.

    An interval's aggregates are few (a row per window and dimension values), so they are
    collected once and committed from this process with delta-rs: a Delta write on Spark
    rebuilds the table's state from its log first (three Spark jobs, and one more to find
    the files to replace), which cost more than the rows. delta-rs refuses a row outside
    [start, end), as Spark's replaceWhere does. With ``count_first`` (an interval of many
    events: ``recompute_views``) the rows are cached and counted first, and more than
    ``batch.local_write_max_rows`` are not collected: Spark writes them, with replaceWhere,
    also in one commit. If a full reprocess switched versions while this write ran, the
    slice is written again into the version readers now use, so no switch can lose it.
    """
    from pyspark import StorageLevel

    source = rows.persist(StorageLevel.MEMORY_AND_DISK) if count_first else rows
    if count_first and (count := source.count()) > settings.batch.local_write_max_rows:
        replace = functools.partial(replace_interval_on_spark, source)
    else:
        table = source.toArrow()
        count, replace = table.num_rows, functools.partial(replace_interval, table)
    try:
        while True:
            version = current_version(settings, view.name)
            path = settings.table_path(physical_table(view.name, version))
            retry_on_conflict(functools.partial(replace, path, start, end))
            if current_version(settings, view.name) == version:
                return SliceWritten(view.name, start, end, count, bronze_version, version,
                                    table_version(path))
    finally:
        if count_first:
            source.unpersist()


def replace_interval(rows: pa.Table, path: str, start: datetime, end: datetime) -> None:
    """One Delta commit that swaps the table's rows in [start, end) for ``rows``."""
    from deltalake import DeltaTable, write_deltalake

    uri = delta_rs_uri(path)
    # created first, empty: two runs whose intervals overlap (a triggered run over days and
    # the scheduled hour in it) may write a new table at once, and delta-rs checks a
    # replace against a concurrent one only on a table both read; a first write that
    # created the table kept both runs' rows of the shared hours. A lost race to create
    # it fails this commit, which ``retry_on_conflict`` tries again.
    if not DeltaTable.is_deltatable(uri):
        DeltaTable.create(uri, schema=rows.schema, mode="ignore", partition_by=["window_start"])
    write_deltalake(uri, rows, mode="overwrite", partition_by=["window_start"],
                    predicate=interval_predicate(start, end))


def replace_interval_on_spark(rows: DataFrame, path: str, start: datetime, end: datetime
                              ) -> None:
    """``replace_interval`` by Spark, for rows too many to collect."""
    rows.write.format("delta").mode("overwrite").partitionBy("window_start") \
        .option("replaceWhere", interval_predicate(start, end)).save(path)


def interval_predicate(start: datetime, end: datetime) -> str:
    """A view table's rows of [start, end), in SQL both delta-rs and Spark read."""
    return (f"window_start >= '{start.astimezone(UTC).isoformat()}' AND "
            f"window_start < '{end.astimezone(UTC).isoformat()}'")


def build_version(
    spark: SparkSession, settings: Settings, view: ViewDefinition, run_id: str,
) -> SliceWritten:
    """Full reprocess: recompute all of the view from all of bronze into a new version.

    Readers keep using the current version; the new one becomes visible with
    ``switch_to`` after it passed its quality gate.
    """
    from pyspark.sql import functions as F

    version = current_version(settings, view.name) + 1
    bronze_path = settings.table_path(BRONZE_TABLE)
    bronze_version = table_version(bronze_path)
    events = spark.read.format("delta").option("versionAsOf", bronze_version).load(bronze_path)
    rows = with_lineage(aggregate_enriched(spark, settings, first_copies(events), view), run_id,
                        bronze_version)
    path = settings.table_path(physical_table(view.name, version))
    rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true") \
        .partitionBy("window_start").save(path)
    written = spark.read.format("delta").load(path).agg(
        F.count(F.lit(1)).alias("rows"), F.min("window_start").cast("long").alias("first"),
        F.max("window_end").cast("long").alias("last"),
    ).first()
    assert written is not None
    return SliceWritten(view.name, _from_epoch(written["first"] or 0),
                        _from_epoch(written["last"] or 0),
                        written["rows"], bronze_version, version, table_version(path))


def switch_to(
    spark: SparkSession, settings: Settings, view: ViewDefinition, version: int, run_id: str,
) -> list[SliceWritten]:
    """Move readers to ``version`` atomically, then carry over newer slices of the old one.

    Scheduled runs may have recomputed slices of the old version (from a newer bronze) after
    the new version read bronze; those slices are recomputed into the new version, so the
    switch never moves a published interval back to older data.
    """
    from pyspark.sql import functions as F

    old = current_version(settings, view.name)
    if old == version:
        return []
    new_path = settings.table_path(physical_table(view.name, version))
    built_from = spark.read.format("delta").load(new_path).agg(F.min("bronze_version")).first()
    switch_version(settings, view.name, version, run_id)
    old_path = settings.table_path(physical_table(view.name, old))
    if built_from is None or built_from[0] is None or not table_exists(old_path):
        return []
    newer = (spark.read.format("delta").load(old_path)
             .where(F.col("bronze_version") > built_from[0])
             .select(F.col("window_start").cast("long").alias("start")).distinct()
             .orderBy("start").collect())
    carried = []
    for row in newer:
        start = _from_epoch(row["start"])
        end = _from_epoch(row["start"] + view.grain_seconds)
        carried += recompute_views(spark, settings, [view], start, end, run_id)
    return carried



def _from_epoch(seconds: int) -> datetime:
    """Timestamps leave Spark as epoch seconds: its naive datetimes are in local time."""
    return datetime.fromtimestamp(seconds, UTC)
