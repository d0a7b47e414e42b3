"""Spark with Delta Lake and the Kafka connector, from the jars setup resolved."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.topics import ensure_topic
from lambdalake.lake.bronze import FILE_WRITE_CONF
from lambdalake.settings import Settings, TopicSettings
from lambdalake.stack.kafka_broker import KafkaCluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_write_append_merge_and_time_travel(spark: SparkSession, settings: Settings) -> None:
    from delta.tables import DeltaTable

    path = settings.table_path(f"test_delta_{uuid.uuid4().hex[:8]}")
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING").write.format("delta").save(path)
    spark.createDataFrame([(3, "c")], "id INT, v STRING").write.format("delta").mode("append").save(path)
    updates = spark.createDataFrame([(2, "B"), (4, "d")], "id INT, v STRING")
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    current = {r.id: r.v for r in spark.read.format("delta").load(path).collect()}
    assert current == {1: "a", 2: "B", 3: "c", 4: "d"}
    first = {r.id: r.v for r in spark.read.format("delta").option("versionAsOf", 0).load(path).collect()}
    assert first == {1: "a", 2: "b"}
    history = DeltaTable.forPath(spark, path).history().select("version", "operation").collect()
    assert [(h.version, h.operation) for h in sorted(history)] == [
        (0, "WRITE"), (1, "WRITE"), (2, "MERGE"),
    ]


def test_batch_read_of_a_topic_through_the_kafka_connector(
    spark: SparkSession, kafka: KafkaCluster, settings: Settings
) -> None:
    topic = TopicSettings(name=f"test.spark.{uuid.uuid4().hex[:8]}", partitions=3)
    ensure_topic(settings.kafka, topic)
    producer = EventProducer(settings.kafka, topic.name)
    for n in range(300):
        producer.send(f"k{n % 3}", str(n))
    assert producer.flush() == 0

    rows = (
        spark.read.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", topic.name)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .selectExpr("partition", "CAST(value AS STRING) AS value")
        .collect()
    )
    assert sorted(int(r.value) for r in rows) == list(range(300))
    assert {r.partition for r in rows} <= set(range(3))


def test_the_driver_jvm_jit_compiles_huge_methods(spark: SparkSession) -> None:
    """The factory's JVM options reach the driver, started by PySpark through spark-submit
    (in local mode the executors run in it too)."""
    arguments = list(spark._jvm.java.lang.management.ManagementFactory
                     .getRuntimeMXBean().getInputArguments())
    assert "-XX:-DontCompileHugeMethods" in arguments


def test_int96_and_int64_timestamp_files_of_one_table_read_alike(
    spark: SparkSession, settings: Settings
) -> None:
    """A bronze written before ingest stored INT64 timestamps (``FILE_WRITE_CONF``) holds
    INT96 files beside the new ones: Spark, delta-rs and a filtered pyarrow scan (the gates'
    slices) read both kinds as the same UTC moments."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    setting = "spark.sql.parquet.outputTimestampType"
    path = settings.table_path(f"test_timestamps_{uuid.uuid4().hex[:8]}")
    # fixed date: a Delta round trip of two moments, never compared with now
    moments = [datetime(2026, 11, 28, 12, 0, 0, 123456, tzinfo=UTC),
               datetime(2026, 11, 28, 12, 0, 1, 654321, tzinfo=UTC)]  # fixed date: as above
    before = spark.conf.get(setting)
    try:
        for storage, moment in zip(["INT96", FILE_WRITE_CONF[setting]], moments, strict=True):
            spark.conf.set(setting, storage)
            (spark.createDataFrame([(moment,)], "occurred_at TIMESTAMP")
             .write.format("delta").mode("append").save(path))
    finally:
        spark.conf.set(setting, before)

    table = DeltaTable(path)
    stored = sorted(pq.ParquetFile(uri.removeprefix("file://")).metadata.schema.column(0)
                    .physical_type for uri in table.file_uris())
    assert stored == ["INT64", "INT96"]
    read_by_spark = sorted(row.occurred_at for row in spark.read.format("delta").load(path)
                           .selectExpr("CAST(occurred_at AS STRING) AS occurred_at").collect())
    assert read_by_spark == [str(moment.replace(tzinfo=None)) for moment in moments]
    assert sorted(table.to_pyarrow_table().column("occurred_at").to_pylist()) == moments
    later = pc.field("occurred_at") > pa.scalar(moments[0], pa.timestamp("us", tz="UTC"))
    assert table.to_pyarrow_dataset().to_table(filter=later).column(
        "occurred_at").to_pylist() == moments[1:]
