"""The batch layer: recompute views for an event-time interval from bronze.

A batch view is a pure function of bronze: the interval's events (however late they
arrived), one row per ``event_id`` (the first copy that reached Kafka), aggregated with the
view's one definition. Bronze is read once per run at a pinned version and deduplicated
once for all views. Each view's rows for [start, end) are written into a staging table of
the run (``stage_views``; ``lambdalake.batch.staging``): the run's gate validates them
there, and its publish copies them into the view's current table in one commit, so a
re-run or a backfill replaces rows and never appends, and no reader sees a slice before
its gate passed. Every row carries its lineage (run id, bronze version, computed-at).

View tables are partitioned by ``window_start``: runs for different intervals write
disjoint partitions, so parallel backfills never conflict, and none of them touches bronze,
which the ingest stream appends to. A *full reprocess* builds a new version of a view from
all of bronze beside the current one; ``switch_to`` then moves readers to it atomically
(``lambdalake.views.catalog``), after carrying over, gated, the slices that runs published
into the old version in the meantime.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from lambdalake.batch.staging import discard, promote, staging_path
from lambdalake.batch.written import SliceWritten
from lambdalake.lake.bronze import BRONZE_TABLE, read_bronze_interval
from lambdalake.lake.delta_rs import delta_rs_uri, table_exists, table_version
from lambdalake.lake.reference import read_versions
from lambdalake.settings import Settings
from lambdalake.views.aggregate import aggregate
from lambdalake.views.catalog import (
    current_version,
    physical_table,
    read_catalog,
    switch_version,
    version_before,
    version_of,
)
from lambdalake.views.definition import ViewDefinition
from lambdalake.views.enrichment import as_of_event_time
from lambdalake.views.measures import KAFKA_ORDER

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LINEAGE_COLUMNS = ("run_id", "bronze_version", "computed_at")


def check_interval(view: ViewDefinition, start: datetime, end: datetime) -> None:
    """An interval must be non-empty, in UTC and aligned to the view's slide (its grain,
    for tumbling windows): a slice holds the windows that start in it."""
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("interval bounds must be timezone-aware (UTC)")
    if start.utcoffset() or end.utcoffset():
        raise ValueError("interval bounds must be in UTC (offset +00:00)")
    if end <= start:
        raise ValueError(f"empty interval [{start}, {end})")
    for bound in (start, end):
        if bound.timestamp() % view.slide_seconds:
            raise ValueError(f"{bound.isoformat()} is not aligned to {view.name}'s "
                             + (f"slide ({view.slide})" if view.slide else
                                f"grain ({view.grain})"))


def first_copies(events: DataFrame) -> DataFrame:
    """One row per ``event_id``: the copy with the lowest Kafka coordinates (deterministic)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy("event_id").orderBy(*KAFKA_ORDER)  # reached Kafka first
    return events.withColumn("_copy", F.row_number().over(first)).where("_copy = 1").drop("_copy")


def compute_slice(
    spark: SparkSession, settings: Settings, view: ViewDefinition, start: datetime,
    end: datetime, bronze_version: int,
) -> DataFrame:
    """The view's rows for [start, end) from bronze at ``bronze_version`` (no lineage)."""
    events = read_bronze_interval(spark, settings, start, reach_end(view, end),
                                  version=bronze_version)
    return aggregate_enriched(spark, settings, first_copies(events), view, (start, end))


def aggregate_enriched(spark: SparkSession, settings: Settings, events: DataFrame,
                       view: ViewDefinition, during: tuple[datetime, datetime] | None = None
                       ) -> DataFrame:
    """The view's rows over deduplicated ``events``, its joins made as of event time.
    ``during``: the slice, whose windows are those starting in it; they read the events
    from its start to its ``reach_end``."""
    from pyspark.sql import functions as F

    if during is not None:
        start, end = during
        during = (start, reach_end(view, end))
        events = events.where((F.col(view.event_time) >= F.lit(start))
                              & (F.col(view.event_time) < F.lit(during[1])))
    if view.joins:
        events = as_of_event_time(events, view, lambda join: read_versions(
            spark, settings, join.entity, join.attributes), during)
    rows = aggregate(events, view)
    if during is None or not view.reach_seconds:
        return rows
    return rows.where((F.col("window_start") >= F.lit(start))
                      & (F.col("window_start") < F.lit(end)))


def reach_end(view: ViewDefinition, end: datetime) -> datetime:
    """Until when the windows starting before ``end`` read events: ``end`` itself for
    tumbling windows, ``grain - slide`` later for hopping ones."""
    return end + timedelta(seconds=view.reach_seconds)


def with_lineage(rows: DataFrame, run_id: str, bronze_version: int) -> DataFrame:
    from pyspark.sql import functions as F

    return rows.withColumns({
        "run_id": F.lit(run_id),
        "bronze_version": F.lit(bronze_version).cast("bigint"),
        "computed_at": F.lit(datetime.now(UTC)).cast("timestamp"),
    })


def stage_views(
    spark: SparkSession, settings: Settings, views: Sequence[ViewDefinition], start: datetime,
    end: datetime, run_id: str, bronze_version: int | None = None,
) -> list[SliceWritten]:
    """Stage every view's slice [start, end), freshly computed from bronze at
    ``bronze_version`` (default: its newest), for the run's gate and publish.

    The views run at the same time (``batch.views_at_once``), on one cache of the
    interval's deduplicated events: an hour's Spark jobs are short, so one at a time leaves
    the server mostly waiting on planning and commits. Each view's write is its own commit;
    a failed view fails the step, and its retry stages every slice again."""
    from pyspark import StorageLevel

    for view in views:
        check_interval(view, start, end)
    if bronze_version is None:
        bronze_version = table_version(settings.table_path(BRONZE_TABLE))
    events = read_bronze_interval(spark, settings, start,
                                  max(reach_end(view, end) for view in views),
                                  version=bronze_version)
    columns = view_columns(views)
    events = (  # cache only what the views read: no raw bytes, no ids once deduplicated
        first_copies(events.select(*sorted({*columns, "event_id", *KAFKA_ORDER})))
        .select(*columns).persist(StorageLevel.MEMORY_AND_DISK)
    )
    # a view has at most a row per event and window it counts in: with few events, every
    # slice fits in the step's memory without counting it first
    distinct_events = events.count()

    def stage(view: ViewDefinition) -> SliceWritten:
        rows = aggregate_enriched(spark, settings, events, view, (start, end))
        return stage_slice(settings, view, start, end, run_id,
                           with_lineage(rows, run_id, bronze_version), bronze_version,
                           count_first=distinct_events * view.windows_per_event
                           > settings.batch.local_write_max_rows)

    try:
        with ThreadPoolExecutor(settings.batch.views_at_once, "recompute") as pool:
            return list(pool.map(stage, views))
    finally:
        events.unpersist()


def view_columns(views: Sequence[ViewDefinition]) -> list[str]:
    """The bronze columns these views read (with the Kafka order, where a view picks
    events by their order)."""
    columns = {"event_type"}
    for view in views:
        columns |= set(view.event_columns) | (set(KAFKA_ORDER) if view.picks_by_order else set())
    return sorted(columns)


def stage_slice(
    settings: Settings, view: ViewDefinition, start: datetime, end: datetime, run_id: str,
    rows: DataFrame, bronze_version: int, *, count_first: bool = False,
) -> SliceWritten:
    """Write ``rows`` as the run's staged slice of ``view`` (``staging_path``), whole.

    An interval's aggregates are few (a row per window and dimension values), so they are
    collected once and committed from this process with delta-rs: a Delta write on Spark
    rebuilds the table's state from its log first, which cost more than the rows. With
    ``count_first`` (an interval of many events: ``stage_views``) the rows are cached and
    counted first, and more than ``batch.local_write_max_rows`` are not collected: Spark
    writes them. The slice reports the view version readers use now (publish copies it
    into the one they use then).
    """
    from deltalake import write_deltalake
    from pyspark import StorageLevel

    path = staging_path(settings, view.name, run_id, start, end)
    source = rows.persist(StorageLevel.MEMORY_AND_DISK) if count_first else rows
    try:
        if count_first and (count := source.count()) > settings.batch.local_write_max_rows:
            source.write.format("delta").mode("overwrite").option("overwriteSchema", "true") \
                .partitionBy("window_start").save(path)
        else:
            table = source.toArrow()
            count = table.num_rows
            write_deltalake(delta_rs_uri(path), table, mode="overwrite",
                            partition_by=["window_start"], schema_mode="overwrite")
    finally:
        if count_first:
            source.unpersist()
    return SliceWritten(view.name, start, end, count, bronze_version,
                        current_version(settings, view.name), table_version(path))


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


SliceGate = Callable[[SliceWritten, str], bool]
"""Validates a staged slice (what the run wrote, where it is staged): passed or not."""


class CarriedSliceRejected(Exception):
    """A slice a full reprocess carries over failed its gate: the switch does not happen."""


def switch_to(
    spark: SparkSession, settings: Settings, view: ViewDefinition, version: int, run_id: str,
    gate: SliceGate,
) -> list[SliceWritten]:
    """Move readers to ``version`` atomically, carrying over the newer slices of the old one.

    Runs may have published slices into the old version (from a newer bronze) after the
    new version read bronze; those slices are recomputed, gated (``gate``) and copied into
    the new version before the switch, so the switch never moves a published interval back
    to older data nor shows an ungated one. A carried slice that fails its gate raises
    ``CarriedSliceRejected`` and readers stay on the old version. Slices published into the
    old version while the carry-over ran are carried after the switch, gated as well (until
    then readers get the new version's own, gated, rows for them); a try that finds the
    switch made (a retried publish) carries those over again.
    """
    switches = read_catalog(settings)
    old = version_of(switches, view.name)
    switched = old == version
    if switched:  # by an earlier try of this publish: finish its carry-over
        before = version_before(switches, view.name)
        if before is None or before == version:
            return []
        old = before
    built_from = lowest_bronze_version(spark, settings.table_path(
        physical_table(view.name, version)))
    old_path = settings.table_path(physical_table(view.name, old))
    carried_from: dict[datetime, int] = {}  # window start -> the old slice's bronze version
    carried = [] if switched else carry_over(spark, settings, view, old_path, built_from,
                                             carried_from, run_id, gate, into_version=version)
    if not switched:
        switch_version(settings, view.name, version, run_id)
    return carried + carry_over(spark, settings, view, old_path, built_from, carried_from,
                                run_id, gate)


def lowest_bronze_version(spark: SparkSession, path: str) -> int:
    """The oldest bronze version a view table's rows were computed from (-1: no rows)."""
    from pyspark.sql import functions as F

    lowest = spark.read.format("delta").load(path).agg(F.min("bronze_version")).first()
    return -1 if lowest is None or lowest[0] is None else int(lowest[0])


def carry_over(
    spark: SparkSession, settings: Settings, view: ViewDefinition, old_path: str,
    built_from: int, carried_from: dict[datetime, int], run_id: str, gate: SliceGate,
    into_version: int | None = None,
) -> list[SliceWritten]:
    """Recompute, gate and copy into the new version (``into_version``, readers do not use
    it yet; None: the one they use) every window of the old table whose rows come from a
    bronze version newer than the new version's (and than what was carried of it already:
    ``carried_from``, updated). Before the switch the first rejected slice stops it; after
    the switch every window is tried, and the rejected ones are named at the end."""
    from pyspark.sql import functions as F

    if not table_exists(old_path):
        return []
    newer = (spark.read.format("delta").load(old_path)
             .where(F.col("bronze_version") > built_from)
             .groupBy(F.col("window_start").cast("long").alias("start"))
             .agg(F.max("bronze_version").alias("bronze_version")).orderBy("start").collect())
    carried, rejected = [], []
    for row in newer:
        start = _from_epoch(row["start"])
        if carried_from.get(start, built_from) >= row["bronze_version"]:
            continue
        end = start + timedelta(seconds=view.slide_seconds)
        [written] = stage_views(spark, settings, [view], start, end, f"{run_id}:carried")
        staged = staging_path(settings, view.name, f"{run_id}:carried", start, end)
        if not gate(written, staged):
            if into_version is not None:
                raise CarriedSliceRejected(
                    f"{view.name}'s carried slice [{start}, {end}) failed its gate: readers "
                    "stay on the current version (`lambdalake quality --failed` lists why)")
            rejected.append(start)
            continue
        promoted = promote(settings, view.name, start, end, staged, written.bronze_version,
                           into_version)
        discard(staged)
        carried_from[start] = row["bronze_version"]
        carried.append(dataclasses.replace(written, view_version=promoted))
    if rejected:
        raise CarriedSliceRejected(
            f"{view.name}'s carried slices of {', '.join(map(str, rejected))} failed their "
            "gate after the switch: readers use the new version, whose own gated rows they "
            "keep there until a restatement (`lambdalake quality --failed` lists why)")
    return carried


def _from_epoch(seconds: int) -> datetime:
    """Timestamps leave Spark as epoch seconds: its naive datetimes are in local time."""
    return datetime.fromtimestamp(seconds, UTC)
