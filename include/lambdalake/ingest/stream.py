"""The ingest stream: Kafka -> bronze + quarantine, exactly once, with progress reported.

One Structured Streaming query reads the events topic and hands each micro-batch to
``write_micro_batch``. Its checkpoint records which Kafka offsets each batch covered; the
Delta writes are idempotent per batch; together a restart, however abrupt, neither loses
nor duplicates a record. ``failOnDataLoss`` makes offsets lost to retention stop the query
loudly instead of being skipped.

The same application runs the reference stream (``lambdalake.ingest.reference``) beside it.
The driver loop writes the query's progress to ``<state dir>/status/ingest.json`` (last
batch, rates, per-partition offsets, lag behind the topic's end; the reference query's
under ``reference``; read through ``lambdalake.ingest.status``) for the status command,
DAG sensors and benchmarks, and on SIGTERM/SIGINT lets the running micro-batch finish
before it stops. A thread of the driver writes bronze's and quarantine's Delta checkpoints
between micro-batches (``lambdalake.lake.checkpoints``).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.ingest.reference import start_reference_ingest
from lambdalake.ingest.status import QUERY_NAME
from lambdalake.kafka.topics import ensure_platform_topics
from lambdalake.lake.bronze import (
    CHECKPOINT_EVERY,
    FILE_WRITE_CONF,
    TABLE_PROPERTIES,
    QuarantineListener,
    upgrade_tables,
    write_micro_batch,
)
from lambdalake.lake.checkpoints import CheckpointWriter
from lambdalake.settings import Settings
from lambdalake.spark import STREAM_SPARK_CONF
from lambdalake.streaming.classification import QUARANTINE_REASONS
from lambdalake.streaming.events import ClassifiedStream
from lambdalake.streaming.metrics import StreamMetrics
from lambdalake.streaming.progress import query_progress
from lambdalake.streaming.runner import query_ledger, run_until_stopped

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

INGEST_SPARK_CONF = {
    # Delta checkpoints a table's state every ``checkpointInterval`` commits, inside the
    # commit that reaches it: 2 s of a micro-batch at bronze's size here (7 s for the first
    # one in a JVM), every ten micro-batches at Delta's default of 10. At 100 a checkpoint
    # costs 0.02 s per batch instead of 0.2 s, and a reader replays at most 100 small commit
    # files after it. Set on the tables ingest creates (the reference tables); bronze and
    # quarantine are checkpointed beside the micro-batches instead (``CheckpointWriter``,
    # ``TABLE_PROPERTIES``); an existing table keeps its own (ALTER TABLE ... SET
    # TBLPROPERTIES)
    "spark.databricks.delta.properties.defaults.checkpointInterval": "100",
    # a micro-batch is cached once, written twice and dropped: compressing its columns costs
    # more than it saves (a 200,000-record batch cached and written in 7.0 s instead of
    # 7.9 s, best of six interleaved runs). It is held uncompressed for a second or two
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    **FILE_WRITE_CONF,
    **STREAM_SPARK_CONF,
}
"""Spark settings of the ingest application (``spark_jobs/ingest.py``)."""

log = logging.getLogger(__name__)


def read_tasks(configured: int, topic_partitions: int, cores: int) -> int:
    """Tasks a micro-batch's Kafka read is split into: ``configured``, or (0) the smallest
    multiple of ``cores`` that covers the topic's partitions.

    Spark reads one task per Kafka partition unless told otherwise; 3 partitions on 2 cores
    then run in two waves, the second on one core, so a CPU-bound batch took a third
    longer than its work needs. Splitting the partitions' offset ranges into 4 tasks keeps
    both cores busy to the end."""
    if configured:
        return configured
    return -(-topic_partitions // cores) * cores


def start_ingest(spark: SparkSession, settings: Settings,
                 metrics: StreamMetrics | None = None) -> StreamingQuery:
    contracts = ContractRegistry()
    listener = None if metrics is None else QuarantineListener(
        QUARANTINE_REASONS, metrics.count_quarantined)
    tasks = read_tasks(settings.ingest.read_tasks, settings.kafka.events_topic.partitions,
                       spark.sparkContext.defaultParallelism)
    stream = ClassifiedStream(spark, settings, contracts, tasks=tasks)
    checkpoint = settings.checkpoint_path(QUERY_NAME)
    ledger = query_ledger(spark, QUERY_NAME)

    def write(classified: DataFrame, batch_id: int) -> None:
        stream.check()
        write_micro_batch(classified, settings, contracts, ledger(), batch_id, listener)

    return (
        stream.records.writeStream.queryName(QUERY_NAME)
        .foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=settings.ingest.trigger_interval)
        .start()
    )


def run(spark: SparkSession, settings: Settings) -> None:
    """Run the ingest query and the reference stream's until one fails or a stop signal
    arrives. The topics they read are created first if missing (as ``lambdalake contracts
    register`` would): a reference query subscribed to a topic no broker hosts fails."""
    ensure_platform_topics(settings.kafka)
    for table in upgrade_tables(spark, settings):
        log.info("ingest: %s given its table properties", table)
    metrics = StreamMetrics(QUERY_NAME)
    metrics.serve(settings.metrics.host, settings.metrics.ingest_port)
    query = start_ingest(spark, settings, metrics)
    log.info("ingest: query %s started, pid %d", query.id, os.getpid())
    reference = start_reference_ingest(spark, settings)
    tables = [settings.table_path(name) for name in TABLE_PROPERTIES]
    with CheckpointWriter(spark, tables, every=CHECKPOINT_EVERY):
        run_until_stopped(settings, QUERY_NAME, [query, reference],
                          lambda snapshots: {**query_progress(snapshots[0]),
                                             "reference": query_progress(snapshots[1])},
                          settings.ingest.status_interval_seconds,
                          restart={QUERY_NAME: lambda: start_ingest(spark, settings, metrics)},
                          metrics=metrics)
