"""The speed layer: every view in near real time from Kafka, one streaming query per
lateness allowance.

Each query reads the events topic, classifies records exactly as ingest does (so it counts
the same valid events the batch layer will, and a malformed record can never fail it),
keeps the event types its views read, puts a watermark on event time equal to their
lateness allowance and drops duplicate ``event_id``s within that watermark. Each
micro-batch of distinct events is then collected as Arrow and aggregated once per view from
the view's one definition (``partials_of``: the batch's *partial* aggregates, distinct
counts as HyperLogLog sketches; see ``lambdalake.speed.partials``). Views that share a
lateness allowance share the parsing and the deduplication, and no view keeps aggregation
state: the only state is the deduplication's, in RocksDB under the query's checkpoint,
bounded by the watermark and kept across restarts.

The deduplication operator is also what drops events older than the watermark, one row per
event, so the count of late events it reports is exact (an aggregation drops *partial
aggregates* instead, which would undercount). The count is the query's: every view the
query maintains reports it, kept in the batch history and the status document; the batch
layer includes those events. Rows reach Delta through ``realtime.append_batch``, exactly
once per micro-batch and view.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from lambdalake.contracts import ContractRegistry
from lambdalake.ingest.stream import kafka_stream
from lambdalake.ingest.validation import classify, valid_only
from lambdalake.settings import Settings
from lambdalake.speed.partials import partials_of
from lambdalake.speed.realtime import append_batch, check_format
from lambdalake.streaming.progress import QuerySnapshot, query_progress, read_history
from lambdalake.streaming.runner import active_query_id, run_until_stopped
from lambdalake.views.definition import ViewDefinition, load_views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

APP = "speed"


def query_name(view: ViewDefinition) -> str:
    """The query that maintains ``view``: one per lateness allowance (and event-time column)."""
    suffix = "" if view.event_time == "occurred_at" else f"_{view.event_time}"
    return f"speed_late_{view.lateness_seconds}s{suffix}"


def queries_of(views: list[ViewDefinition]) -> dict[str, list[ViewDefinition]]:
    """The views each query maintains, by query name."""
    queries: dict[str, list[ViewDefinition]] = {}
    for view in views:
        queries.setdefault(query_name(view), []).append(view)
    return queries


def distinct_events(events: DataFrame, views: list[ViewDefinition]) -> DataFrame:
    """The events ``views`` (one lateness allowance) read, watermarked, each ``event_id``
    once within the watermark, with only the columns the views use."""
    from pyspark.sql import functions as F

    first = views[0]
    types = sorted({t for view in views for t in view.event_types})
    columns = list(dict.fromkeys(["event_id", "event_type", first.event_time, *(
        c for view in views for c in [*view.dimensions, *(m.column for m in view.measures)]
        if c is not None)]))
    return (
        events.where(F.col("event_type").isin(types)).select(*columns)
        .withWatermark(first.event_time, f"{first.lateness_seconds} seconds")
        .dropDuplicatesWithinWatermark(["event_id"])
    )


def valid_events(spark: SparkSession, settings: Settings, contracts: ContractRegistry) -> DataFrame:
    """The records ingest would put in bronze, typed (the others: skipped, never fatal)."""
    records = kafka_stream(spark, settings, settings.speed.max_offsets_per_trigger)
    return valid_only(classify(records, contracts, settings.ingest))


def write_partials(events: DataFrame, settings: Settings, views: list[ViewDefinition],
                   app_id: str, batch_id: int) -> None:
    """Append each view's partial aggregates of one micro-batch of distinct events. The
    batch (the few columns the views read) is collected once, as Arrow, and aggregated
    there per view: one Spark job per micro-batch instead of one per view."""
    batch = events.toArrow()
    for view in views:
        append_batch(partials_of(batch, view), settings, view, app_id, batch_id)


def start_query(
    spark: SparkSession, settings: Settings, name: str, views: list[ViewDefinition],
    contracts: ContractRegistry,
) -> StreamingQuery:
    app_ids: list[str] = []

    def write(events: DataFrame, batch_id: int) -> None:
        if not app_ids:  # the query's id is kept in its checkpoint: stable across restarts
            app_ids.append(f"lambdalake-{name}-{active_query_id(spark, name)}")
        write_partials(events, settings, views, app_ids[0], batch_id)

    return (
        distinct_events(valid_events(spark, settings, contracts), views)
        .writeStream.queryName(name)
        .foreachBatch(write)
        .option("checkpointLocation", settings.checkpoint_path(name))
        .trigger(processingTime=settings.speed.trigger_interval)
        .start()
    )


class LateRows:
    """Rows each query dropped because they were older than its watermark, counting every
    (run, batch) once: a batch replayed after a crash reports its drops again."""

    def __init__(self, batches: list[dict[str, Any]]) -> None:
        self._by_batch: dict[tuple[str, str, int], int] = {}
        self.add(batches)

    def add(self, batches: list[dict[str, Any]]) -> None:
        for entry in batches:
            key = (entry["query"], entry["run_id"], entry["batch_id"])
            self._by_batch[key] = entry["dropped_by_watermark"]

    def totals(self) -> Counter[str]:
        totals: Counter[str] = Counter()
        for (query, _run, _batch), dropped in self._by_batch.items():
            totals[query] += dropped
        return totals


def status_document(
    queries: dict[str, list[ViewDefinition]], snapshots: list[QuerySnapshot], late: LateRows,
    new_batches: list[dict[str, Any]], pid: int,
) -> dict[str, Any]:
    """The speed layer's status: one entry per view (its query's progress), with the
    query's cumulative late-dropped rows."""
    late.add(new_batches)
    dropped = late.totals()
    entries = {
        view.name: {**query_progress(snapshot),
                    "dropped_by_watermark_total": dropped[snapshot.name]}
        for snapshot in snapshots for view in queries[snapshot.name]
    }
    return {"app": APP, "pid": pid, "written_at": time.time(),
            "active": all(s.active for s in snapshots), "views": dict(sorted(entries.items()))}


def run(spark: SparkSession, settings: Settings, view_names: list[str] | None = None) -> None:
    """Run one query per lateness allowance of the chosen views until stopped (or until
    one fails)."""
    contracts = ContractRegistry()
    views = load_views(contracts=contracts)
    chosen = queries_of([views[name] for name in (view_names or sorted(views))])
    check_format(settings, [view for group in chosen.values() for view in group])
    queries = [start_query(spark, settings, name, group, contracts)
               for name, group in chosen.items()]
    late = LateRows(read_history(settings, APP))
    described = "; ".join(f"{name}: {', '.join(v.name for v in group)}"
                          for name, group in chosen.items())
    print(f"speed: {len(queries)} queries started ({described}), pid {os.getpid()}", flush=True)
    run_until_stopped(
        settings, APP, queries,
        lambda snapshots, new: status_document(chosen, snapshots, late, new, os.getpid()),
        settings.speed.status_interval_seconds,
    )


def speed_spark_conf(settings: Settings) -> dict[str, str]:
    """The speed application's Spark properties beyond the platform's defaults: few state
    and aggregation partitions, and RocksDB changelog checkpoints (a batch commits only what
    it changed)."""
    return {
        "spark.sql.shuffle.partitions": str(settings.speed.shuffle_partitions),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }
