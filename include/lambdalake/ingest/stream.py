"""The ingest stream: Kafka -> bronze + quarantine, exactly once, with progress reported.

One Structured Streaming query reads the events topic and hands each micro-batch to
``write_micro_batch``. Its checkpoint records which Kafka offsets each batch covered; the
Delta writes are idempotent per batch; together a restart, however abrupt, neither loses
nor duplicates a record. ``failOnDataLoss`` makes offsets lost to retention stop the query
loudly instead of being skipped.

The same application runs the reference stream (``lambdalake.ingest.reference``) beside it.
The driver loop writes the query's progress to ``<state dir>/status/ingest.json`` (last
batch, rates, per-partition offsets, lag behind the topic's end; the reference query's
under ``reference``) for the status command,
DAG sensors and benchmarks, and on SIGTERM/SIGINT lets the running micro-batch finish
before it stops.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lambdalake.contracts import ContractRegistry
from lambdalake.ingest.reference import start_reference_ingest
from lambdalake.ingest.validation import classify
from lambdalake.kafka.schema_registry import TopicSchemas
from lambdalake.lake.bronze import write_micro_batch
from lambdalake.settings import Settings
from lambdalake.streaming import progress
from lambdalake.streaming.progress import query_progress
from lambdalake.streaming.runner import active_query_id, run_until_stopped

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

QUERY_NAME = "ingest"


def status_path(settings: Settings) -> Path:
    return progress.status_path(settings, QUERY_NAME)


def read_status(settings: Settings) -> dict[str, Any] | None:
    return progress.read_status(settings, QUERY_NAME)


def history_path(settings: Settings) -> Path:
    return progress.history_path(settings, QUERY_NAME)


def kafka_stream(
    spark: SparkSession, settings: Settings, max_offsets_per_trigger: int | None = None
) -> DataFrame:
    """The events topic as a stream of Kafka records (the speed layer reads it too)."""
    ingest = settings.ingest
    return (
        spark.readStream.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", settings.kafka.events_topic.name)
        .option("startingOffsets", ingest.starting_offsets)
        .option("failOnDataLoss", str(ingest.fail_on_data_loss).lower())
        .option("maxOffsetsPerTrigger",
                max_offsets_per_trigger or ingest.max_offsets_per_trigger)
        .load()
    )


def start_ingest(spark: SparkSession, settings: Settings) -> StreamingQuery:
    contracts = ContractRegistry()
    schemas = TopicSchemas(settings.registry, contracts, settings.kafka.events_topic.name)
    checkpoint = settings.checkpoint_path(QUERY_NAME)
    app_ids: list[str] = []

    def write(batch: DataFrame, batch_id: int) -> None:
        if not app_ids:  # the session that started the query (a batch's own is a clone)
            app_ids.append(f"lambdalake-ingest-{active_query_id(spark, QUERY_NAME)}")
        classified = classify(batch, contracts, settings.ingest, schemas.current())
        write_micro_batch(classified, settings, contracts, app_ids[0], batch_id)

    return (
        kafka_stream(spark, settings).writeStream.queryName(QUERY_NAME)
        .foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=settings.ingest.trigger_interval)
        .start()
    )


def run(spark: SparkSession, settings: Settings) -> None:
    """Run the ingest query and the reference stream's until one fails or a stop signal
    arrives."""
    query = start_ingest(spark, settings)
    print(f"ingest: query {query.id} started, pid {os.getpid()}", flush=True)
    reference = start_reference_ingest(spark, settings)
    run_until_stopped(settings, QUERY_NAME, [query, reference],
                      lambda snapshots: {**query_progress(snapshots[0]),
                                         "reference": query_progress(snapshots[1])},
                      settings.ingest.status_interval_seconds)
