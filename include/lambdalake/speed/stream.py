"""The speed layer: every view in near real time from Kafka, one streaming query per
lateness allowance.

Each query reads the events topic (a shard's partitions of it: ``lambdalake.speed.shards``),
classifies records exactly as ingest does, in its plan (``ClassifiedStream``: it counts the
same valid events the batch layer will, and a malformed record can never fail it), and keeps
the event types its views read, with only the columns they use. Each micro-batch is
collected once as Arrow; ``SeenEvents`` (``lambdalake.speed.dedup``) keeps the events seen
for the first time and not later than the query's watermark (its newest event time minus
the lateness allowance), and each view's partial aggregates of those events come from the
view's one definition (``partials_of``: distinct counts as HyperLogLog sketches; see
``lambdalake.speed.partials``). Views that share a lateness allowance share the parsing and
the deduplication, and no view keeps aggregation state: the only state is the counted
event ids, beside the query's checkpoint, bounded by the watermark and kept across
restarts. The Spark side is one stateless job per micro-batch. Views that join reference
data take each entity's current attributes (``CurrentReference``, rebuilt from the
compacted topics at start) as of the micro-batch's processing time.

Late rows are counted per view (a row counts for every view that reads its event type) and
reported in the status; the batch layer includes those events. Rows reach Delta through
``realtime.RealtimeTable``, exactly once per micro-batch and view.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings
from lambdalake.speed.dedup import SeenEvents, state_directory
from lambdalake.speed.partials import partials_of
from lambdalake.speed.realtime import RealtimeTable, check_format
from lambdalake.speed.reference_state import CurrentReference
from lambdalake.speed.shards import Shard, check_shard_layout, shards
from lambdalake.streaming.classification import valid_only
from lambdalake.streaming.events import ClassifiedStream
from lambdalake.streaming.metrics import StreamMetrics
from lambdalake.streaming.progress import QuerySnapshot, query_progress
from lambdalake.streaming.runner import active_query_id, run_until_stopped
from lambdalake.views.definition import ViewDefinition, load_views
from lambdalake.views.enrichment import as_of_now
from lambdalake.views.measures import KAFKA_ORDER

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)


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


def view_events(events: DataFrame, views: list[ViewDefinition]) -> DataFrame:
    """The events of the types ``views`` read, with only the columns they use (and the
    records' Kafka coordinates, where a view's measure picks events by their order)."""
    from pyspark.sql import functions as F

    types = sorted({t for view in views for t in view.event_types})
    columns: list[Column | str] = list(dict.fromkeys([
        "event_id", "event_type", views[0].event_time,
        *(c for view in views for c in view.event_columns)]))
    if any(view.picks_by_order for view in views):
        # an ordered kind's tie-break, as bronze names it (the source calls it ``timestamp``)
        kafka_timestamp, *coordinates = KAFKA_ORDER
        columns += [F.col("timestamp").alias(kafka_timestamp), *coordinates]
    return events.where(F.col("event_type").isin(types)).select(*columns)


def write_partials(events: DataFrame, tables: list[RealtimeTable], seen: SeenEvents,
                   app_id: str, batch_id: int, reference: CurrentReference,
                   shard: Shard) -> None:
    """Append each view's partial aggregates of one micro-batch's newly seen, timely events.
    The batch (the few columns the views read) is collected once, as Arrow, deduplicated
    and aggregated there per view: one Spark job per micro-batch. A view's joins take the
    reference data's current state (as of processing time: every change the topics held
    when the micro-batch began). The views' tables are written at once, each in a thread of
    its own (Arrow and delta-rs work outside the GIL): a micro-batch costs its slowest
    view's commit, not the sum of them."""
    if any(table.view.joins for table in tables):
        reference.catch_up(reference.settings.speed.reference_catch_up_seconds)
    admission = seen.admit(events.toArrow(), batch_id)

    def append(table: RealtimeTable) -> bool:
        rows = (as_of_now(admission.events, table.view, reference.lookup) if table.view.joins
                else admission.events)
        return table.append(partials_of(rows, table.view), app_id, batch_id, shard.index)

    with ThreadPoolExecutor(max_workers=len(tables), thread_name_prefix="append") as pool:
        list(pool.map(append, tables))  # every append done (or its error raised) before ...
    seen.record(admission)  # ... the state moves on: a replay starts from the state before


def start_query(
    spark: SparkSession, settings: Settings, name: str, views: list[ViewDefinition],
    contracts: ContractRegistry, seen: SeenEvents, reference: CurrentReference, shard: Shard,
) -> StreamingQuery:
    app_ids: list[str] = []
    tables = [RealtimeTable(settings, view) for view in views]
    partitions = (shard.partitions(settings.kafka.events_topic.partitions) if shard.assigned
                  else None)
    stream = ClassifiedStream(spark, settings, contracts, settings.speed.max_offsets_per_trigger,
                              partitions)

    def write(events: DataFrame, batch_id: int) -> None:
        stream.check()
        if not app_ids:  # the query's id is kept in its checkpoint: stable across restarts
            app_ids.append(f"lambdalake-{name}-{active_query_id(spark, name)}")
        write_partials(events, tables, seen, app_ids[0], batch_id, reference, shard)

    return (
        view_events(valid_only(stream.records), views)
        .writeStream.queryName(name)
        .foreachBatch(write)
        .option("checkpointLocation", settings.checkpoint_path(shard.checkpoint(name)))
        .trigger(processingTime=settings.speed.trigger_interval)
        .start()
    )


def late_count_horizon(settings: Settings) -> timedelta:
    """How far before the watermark a window can still be whole in the speed layer: events
    older than ``ingest.max_event_age_days`` are quarantined (never late), and Kafka keeps
    the events topic's records for its retention (a speed layer started afresh reads no
    older ones)."""
    age = timedelta(days=settings.ingest.max_event_age_days)
    retention = settings.kafka.events_topic.retention_ms
    return age if retention < 0 else min(age, timedelta(milliseconds=retention))


def status_document(
    queries: dict[str, list[ViewDefinition]], snapshots: list[QuerySnapshot],
    seen: dict[str, SeenEvents], pid: int, reference: CurrentReference, shard: Shard,
) -> dict[str, Any]:
    """The speed layer's status: one entry per view (its query's progress and state, and
    the view's own late rows), and the reference state's keys per joined entity."""
    entries: dict[str, dict[str, Any]] = {}
    for snapshot in snapshots:
        state = seen[snapshot.name].status()
        late = state.pop("dropped_by_watermark_total")
        late_by_window = state.pop("dropped_by_window")
        for view in queries[snapshot.name]:
            entries[view.name] = {**query_progress(snapshot), **state,
                                  "dropped_by_watermark_total": late.get(view.name, 0),
                                  "dropped_by_window": late_by_window.get(view.name, {})}
    return {"app": shard.app, "pid": pid, "written_at": time.time(),
            "active": all(s.active for s in snapshots), "views": dict(sorted(entries.items())),
            "reference": reference.status()}


def run(spark: SparkSession, settings: Settings, view_names: list[str] | None = None,
        shard_index: int = 0) -> None:
    """Run one query per lateness allowance of the chosen views until stopped (or until
    one fails), as shard ``shard_index`` of ``speed.shards``."""
    if not 0 <= shard_index < settings.speed.shards:
        raise ValueError(f"no shard {shard_index}: speed.shards is {settings.speed.shards} "
                         f"(shards 0 to {settings.speed.shards - 1})")
    shard = shards(settings)[shard_index]
    if shard.assigned:  # the partitions to split are the settings' (or it fails loudly)
        ensure_topic(settings.kafka, settings.kafka.events_topic)
    check_shard_layout(settings, shard)
    contracts = ContractRegistry()
    views = load_views(contracts=contracts)
    chosen = queries_of([views[name] for name in (view_names or sorted(views))])
    check_format(settings, [view for group in chosen.values() for view in group])
    seen = {name: SeenEvents(state_directory(settings.checkpoint_path(shard.checkpoint(name))),
                             group, late_count_horizon(settings),
                             counts_from_start=settings.ingest.starting_offsets == "latest",
                             clock_bound=timedelta(
                                 seconds=settings.ingest.max_future_skew_seconds))
            for name, group in chosen.items()}
    reference = CurrentReference(settings, [join for group in chosen.values()
                                            for view in group for join in view.joins])
    reference.start()  # before the first micro-batch joins with it
    try:
        starters = {name: partial(start_query, spark, settings, name, group, contracts,
                                  seen[name], reference, shard)
                    for name, group in chosen.items()}
        queries = [start() for start in starters.values()]
        described = "; ".join(f"{name}: {', '.join(v.name for v in group)}"
                              for name, group in chosen.items())
        log.info("%s: %d queries started (%s), reference state %s, pid %d", shard.describe(),
                 len(queries), described, reference.status(), os.getpid())
        metrics = StreamMetrics(shard.app)
        port = settings.metrics.speed_port
        metrics.serve(settings.metrics.host, None if port is None else port + shard.index)
        run_until_stopped(
            settings, shard.app, queries,
            lambda snapshots: status_document(chosen, snapshots, seen, os.getpid(), reference,
                                              shard),
            settings.speed.status_interval_seconds, restart=starters, metrics=metrics,
        )
    finally:
        reference.close()
