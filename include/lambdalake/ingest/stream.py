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

import json
import os
from typing import TYPE_CHECKING

from lambdalake.contracts import ContractRegistry
from lambdalake.ingest.reference import start_reference_ingest
from lambdalake.ingest.status import QUERY_NAME
from lambdalake.ingest.validation import classify
from lambdalake.kafka.schema_registry import TopicSchemas
from lambdalake.kafka.topics import ensure_platform_topics
from lambdalake.lake.bronze import (
    CHECKPOINT_EVERY,
    FILE_WRITE_CONF,
    TABLE_PROPERTIES,
    upgrade_tables,
    write_micro_batch,
)
from lambdalake.lake.checkpoints import CheckpointWriter
from lambdalake.settings import Settings
from lambdalake.spark import STREAM_SPARK_CONF
from lambdalake.streaming.progress import query_progress
from lambdalake.streaming.runner import PlanOutdated, query_ledger, run_until_stopped

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


def kafka_stream(
    spark: SparkSession, settings: Settings, max_offsets_per_trigger: int | None = None,
    partitions: list[int] | None = None, tasks: int | None = None,
) -> DataFrame:
    """The events topic as a stream of Kafka records (the speed layer reads it too): all of
    its partitions, or only ``partitions`` (a speed shard's); each batch read in ``tasks``
    tasks at least (default: one per partition)."""
    ingest = settings.ingest
    topic = settings.kafka.events_topic.name
    source = (("assign", json.dumps({topic: partitions})) if partitions is not None
              else ("subscribe", topic))
    reader = (
        spark.readStream.format("kafka")
        .options(**settings.kafka.spark_options())
        .option(*source)
        .option("startingOffsets", ingest.starting_offsets)
        .option("failOnDataLoss", str(ingest.fail_on_data_loss).lower())
        .option("maxOffsetsPerTrigger",
                max_offsets_per_trigger or ingest.max_offsets_per_trigger)
    )
    if tasks is not None:
        reader = reader.option("minPartitions", tasks)
    return reader.load()


class ClassifiedStream:
    """The events topic as a stream of classified records (``classify``).

    The classification is part of the query's plan, built once when the query starts:
    built for each micro-batch it took about 0.6 s of each one's time. The Avro schemas it
    decodes are those registered then. Each micro-batch calls ``check`` first; one that
    finds the topic's schemas changed (a version registered since) raises ``PlanOutdated``
    and, having written nothing, runs again in the query ``run_until_stopped`` starts
    anew. A record is produced only after its schema is registered, and a micro-batch's
    offsets are fixed before it runs, so a batch that passed ``check`` holds no record whose
    schema its plan lacks."""

    def __init__(self, spark: SparkSession, settings: Settings, contracts: ContractRegistry,
                 max_offsets_per_trigger: int | None = None,
                 partitions: list[int] | None = None, tasks: int | None = None) -> None:
        self.schemas = TopicSchemas(settings.registry, contracts,
                                    settings.kafka.events_topic.name)
        self.planned = self.schemas.current()
        self.records = classify(
            kafka_stream(spark, settings, max_offsets_per_trigger, partitions, tasks),
            contracts, settings.ingest, self.planned)

    def check(self) -> None:
        """Raise ``PlanOutdated`` if the registered schemas are not those planned with."""
        now = self.schemas.current()
        if now != self.planned:
            raise PlanOutdated(f"the events topic's registered schemas changed (ids "
                               f"{sorted(self.planned.by_id)} -> {sorted(now.by_id)}, registry "
                               f"answered: {self.planned.complete} -> {now.complete})")


def start_ingest(spark: SparkSession, settings: Settings) -> StreamingQuery:
    contracts = ContractRegistry()
    tasks = read_tasks(settings.ingest.read_tasks, settings.kafka.events_topic.partitions,
                       spark.sparkContext.defaultParallelism)
    stream = ClassifiedStream(spark, settings, contracts, tasks=tasks)
    checkpoint = settings.checkpoint_path(QUERY_NAME)
    ledger = query_ledger(spark, QUERY_NAME)

    def write(classified: DataFrame, batch_id: int) -> None:
        stream.check()
        write_micro_batch(classified, settings, contracts, ledger(), batch_id)

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
        print(f"ingest: {table} given its table properties", flush=True)
    query = start_ingest(spark, settings)
    print(f"ingest: query {query.id} started, pid {os.getpid()}", flush=True)
    reference = start_reference_ingest(spark, settings)
    tables = [settings.table_path(name) for name in TABLE_PROPERTIES]
    with CheckpointWriter(spark, tables, every=CHECKPOINT_EVERY):
        run_until_stopped(settings, QUERY_NAME, [query, reference],
                          lambda snapshots: {**query_progress(snapshots[0]),
                                             "reference": query_progress(snapshots[1])},
                          settings.ingest.status_interval_seconds,
                          restart={QUERY_NAME: lambda: start_ingest(spark, settings)})
