"""The smoke pipeline: Kafka -> Spark -> Delta -> read back, through every real component.

It proves the stack works end to end before the real layers run: events are produced with
the library producer, read by Spark's Kafka connector, MERGEd into a Delta table keyed by
their Kafka coordinates (so a re-run adds nothing), and read back. The check is exact:
the table holds one row per record of the topic.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SMOKE_TABLE = "smoke_events"


class SmokeCheckFailed(AssertionError):
    """The Delta table does not hold exactly the records of the topic."""


@dataclass(frozen=True)
class SmokeResult:
    topic_records: int
    table_rows: int
    table_version: int


def produce_smoke_events(settings: Settings, count: int) -> int:
    """Produce ``count`` small JSON events; return how many the broker acknowledged."""
    topic = settings.kafka.smoke_topic
    ensure_topic(settings.kafka, topic)
    producer = EventProducer(settings.kafka, topic.name)
    batch = uuid.uuid4().hex
    for n in range(count):
        user = f"user-{n % 7}"
        producer.send(user, json.dumps({"batch": batch, "n": n, "user_id": user}))
    unconfirmed = producer.flush()
    if unconfirmed or producer.counts.failed:
        raise RuntimeError(f"{unconfirmed} unconfirmed, {producer.counts.errors} failed deliveries")
    return producer.counts.acknowledged


def kafka_to_delta(spark: SparkSession, settings: Settings) -> SmokeResult:
    """Copy the smoke topic into Delta exactly once per record, then check it."""
    from delta.tables import DeltaTable

    records = (
        spark.read.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", settings.kafka.smoke_topic.name)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .selectExpr(
            "topic", "partition", "offset", "timestamp AS kafka_timestamp",
            "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
        )
    )
    path = settings.table_path(SMOKE_TABLE)
    if not DeltaTable.isDeltaTable(spark, path):
        records.limit(0).write.format("delta").save(path)
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(
            records.alias("s"),
            "t.topic = s.topic AND t.partition = s.partition AND t.offset = s.offset",
        )
        .whenNotMatchedInsertAll()
        .execute()
    )
    topic_records = records.count()
    table = DeltaTable.forPath(spark, path)
    result = SmokeResult(
        topic_records=topic_records,
        table_rows=table.toDF().count(),
        table_version=int(table.history(1).collect()[0]["version"]),
    )
    if result.table_rows != result.topic_records:
        raise SmokeCheckFailed(f"{result}: the table should hold one row per topic record")
    return result
