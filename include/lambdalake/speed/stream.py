"""The speed layer: every view in near real time from Kafka, one streaming query per view.

Each query reads the events topic, classifies records exactly as ingest does (so it counts
the same valid events the batch layer will, and a malformed record can never fail it),
keeps the view's event types, puts a watermark on event time equal to the view's lateness
allowance, drops duplicate ``event_id``s within that watermark, and aggregates with the
view's one definition (``aggregate(exact=False)``: distinct counts become HyperLogLog
sketches).

The deduplication operator is also what drops events older than the watermark, one row per
event, so the count of late events it reports is exact (an aggregation drops *partial
aggregates* instead, which would undercount). That count is kept per view in the batch
history and the status document; the batch layer includes those events. State
lives in RocksDB under the query's checkpoint, so it is bounded by the watermark and
survives restarts. Rows reach Delta through ``realtime.append_updates``, exactly once per
micro-batch.
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
from lambdalake.speed.realtime import append_updates
from lambdalake.streaming.progress import QuerySnapshot, query_progress, read_history
from lambdalake.streaming.runner import active_query_id, run_until_stopped
from lambdalake.views.aggregate import aggregate
from lambdalake.views.definition import ViewDefinition, load_views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

APP = "speed"


def query_name(view: ViewDefinition | str) -> str:
    return f"speed_{view if isinstance(view, str) else view.name}"


def view_updates(events: DataFrame, view: ViewDefinition) -> DataFrame:
    """The streaming aggregation of ``view`` over valid, typed events (update mode)."""
    from pyspark.sql import functions as F

    rows = (
        events.where(F.col("event_type").isin(view.event_types))
        .withWatermark(view.event_time, f"{view.lateness_seconds} seconds")
        .dropDuplicatesWithinWatermark(["event_id"])
    )
    return aggregate(rows, view, exact=False)


def valid_events(spark: SparkSession, settings: Settings, contracts: ContractRegistry) -> DataFrame:
    """The records ingest would put in bronze, typed (the others: skipped, never fatal)."""
    records = kafka_stream(spark, settings, settings.speed.max_offsets_per_trigger)
    return valid_only(classify(records, contracts, settings.ingest))


def start_view_query(
    spark: SparkSession, settings: Settings, view: ViewDefinition, contracts: ContractRegistry
) -> StreamingQuery:
    name = query_name(view)
    app_ids: list[str] = []

    def write(updates: DataFrame, batch_id: int) -> None:
        if not app_ids:  # the query's id is kept in its checkpoint: stable across restarts
            app_ids.append(f"lambdalake-{name}-{active_query_id(spark, name)}")
        append_updates(updates, settings, view, app_ids[0], batch_id)

    return (
        view_updates(valid_events(spark, settings, contracts), view)
        .writeStream.queryName(name)
        .outputMode("update")
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
    views: list[str], snapshots: list[QuerySnapshot], late: LateRows,
    new_batches: list[dict[str, Any]], pid: int,
) -> dict[str, Any]:
    """The speed layer's status: one entry per view, with its cumulative late-dropped rows."""
    late.add(new_batches)
    dropped = late.totals()
    entries = {
        view: {**query_progress(snapshot), "dropped_by_watermark_total": dropped[snapshot.name]}
        for view, snapshot in zip(views, snapshots, strict=True)
    }
    return {"app": APP, "pid": pid, "written_at": time.time(),
            "active": all(s.active for s in snapshots), "views": entries}


def run(spark: SparkSession, settings: Settings, view_names: list[str] | None = None) -> None:
    """Run one query per view until stopped (or until one fails)."""
    contracts = ContractRegistry()
    views = load_views(contracts=contracts)
    chosen = [views[name] for name in (view_names or sorted(views))]
    queries = {view.name: start_view_query(spark, settings, view, contracts) for view in chosen}
    late = LateRows(read_history(settings, APP))
    print(f"speed: {len(queries)} queries started ({', '.join(queries)}), pid {os.getpid()}",
          flush=True)
    run_until_stopped(
        settings, APP, list(queries.values()),
        lambda snapshots, new: status_document(list(queries), snapshots, late, new, os.getpid()),
        settings.speed.status_interval_seconds,
    )


def speed_spark_conf(settings: Settings) -> dict[str, str]:
    """The speed application's Spark properties beyond the platform's defaults: few state
    partitions, and RocksDB changelog checkpoints (a batch commits only what it changed)."""
    return {
        "spark.sql.shuffle.partitions": str(settings.speed.shuffle_partitions),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }
