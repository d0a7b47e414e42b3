"""The batch benchmarks' bronze, generated directly with Spark (no Kafka), which the batch
and restatement benchmarks both read: N rows in exactly the schema the ingest writes
(contract fields, ``event_date`` partition, Kafka provenance, raw JSON bytes), over 24 hours
of event time across two UTC days, with ~1.5 % duplicate copies of events (same
``event_id``, a later Kafka offset and time) and realistic cardinalities. Files are a few
hundred MB, like a compacted bronze. Each size is generated once and kept on disk
(``<state dir>/bench-bronze-<N>-v<V>``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness.common import Stopwatch
from lambdalake.contracts.registry import ContractRegistry
from lambdalake.lake.bronze import BRONZE_TABLE, bronze_columns
from lambdalake.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

GENERATOR_VERSION = 1  # bump when the generated data changes: old caches are not reused
ROWS_PER_SHUFFLE_PARTITION = 500_000  # shuffle partitions: N / this, at least 8

START = datetime(2025, 3, 1, 12, tzinfo=UTC)  # 24 hours across two UTC days
END = START + timedelta(hours=24)

DUPLICATE_FRACTION = 0.015  # of the unique events: copies with a later offset
USERS, SESSIONS_PER_USER, PAGES, PRODUCTS = 100_000, 3, 200, 500
COUNTRIES = ("DE", "FR", "GB", "US", "NL", "ES", "IT", "PL", "BE", "AT", "CH", "SE", "DK",
             "NO", "FI", "IE", "PT", "CZ", "CA", "AU")
DEVICES = ("desktop", "mobile", "tablet")
TOPIC = "lambdalake.events"
ROWS_PER_WRITE_TASK = 1_500_000  # ~1 file per task and event date: a few hundred MB


def cache_dir(settings: Settings, events: int) -> Path:
    """Where the bronze of ``events`` rows is kept (a new generator version: a new place)."""
    return settings.state_dir / f"bench-bronze-{events}-v{GENERATOR_VERSION}"


def lake_settings(settings: Settings, events: int) -> Settings:
    """Settings whose lake holds the cached bronze of ``events`` rows (and the view tables)."""
    copy = settings.model_copy(deep=True)
    copy.lake.root = str(cache_dir(settings, events) / "lake")
    return copy


def bronze_frame(spark: SparkSession, events: int) -> DataFrame:
    """``events`` synthetic bronze rows, deterministic, in bronze's columns and types."""
    from pyspark.sql import functions as F

    contracts = ContractRegistry()
    fields = contracts.all_fields()
    unique = round(events / (1 + DUPLICATE_FRACTION))
    span_ms = int((END - START).total_seconds() * 1000)
    start_ms = int(START.timestamp() * 1000)

    def uniform(column: str, salt: int) -> Any:  # deterministic U[0, 1) from a column
        return F.pmod(F.xxhash64(F.col(column), F.lit(salt)), F.lit(1 << 30)) / float(1 << 30)

    def hex16(column: str, salt: int) -> Any:
        return F.lpad(F.lower(F.hex(F.xxhash64(F.col(column), F.lit(salt)))), 16, "0")

    def pick(values: tuple[str, ...], u: Any) -> Any:
        index = (F.floor(u * len(values)) + 1).cast("int")
        return F.element_at(F.array(*map(F.lit, values)), index)

    tasks = max(2, math.ceil(events / ROWS_PER_WRITE_TASK))
    rows = spark.range(0, events, 1, tasks).withColumn(
        # the last rows are later copies of earlier events (same event, another offset)
        "src", F.when(F.col("id") < unique, F.col("id"))
        .otherwise(F.pmod(F.xxhash64(F.col("id"), F.lit(1)), F.lit(unique)))
    )
    rows = rows.withColumns({
        "_user": F.floor(F.pow(uniform("src", 2), 2) * USERS),  # skewed: few heavy users
        "_roll": uniform("src", 3),
        "_occurred_ms": F.lit(start_ms) + F.floor(F.col("src") * span_ms / unique),
        "_late": uniform("src", 4),
    })
    event_type = (F.when(F.col("_roll") < 0.7, "page_view")
                  .when(F.col("_roll") < 0.9, "add_to_cart").otherwise("purchase"))
    rows = rows.withColumns({
        "event_type": event_type,
        "_session": F.col("_user") * SESSIONS_PER_USER
        + F.floor(uniform("src", 5) * SESSIONS_PER_USER),
        "country": F.element_at(
            F.array(*map(F.lit, COUNTRIES)),
            (F.pmod(F.xxhash64(F.col("_user"), F.lit(6)), F.lit(len(COUNTRIES))) + 1).cast("int"),
        ),
    })
    h1, h2 = hex16("src", 11), hex16("src", 12)
    is_view, is_purchase = F.col("event_type") == "page_view", F.col("event_type") == "purchase"
    kafka_ms = (F.col("_occurred_ms") + F.floor(uniform("src", 13) * 2000)
                + F.when(F.col("_late") < 0.05, F.floor(uniform("src", 14) * 1_800_000))
                .otherwise(0))
    copy_delay_ms = F.when(F.col("id") < unique, 0).otherwise(
        1000 + F.floor(uniform("id", 15) * 60_000))
    rows = rows.withColumns({
        "event_id": F.concat_ws("-", F.substring(h1, 1, 8), F.substring(h1, 9, 4),
                                F.concat(F.lit("4"), F.substring(h1, 13, 3)),
                                F.substring(h2, 1, 4), F.substring(h2, 5, 12)),
        "user_id": F.concat(F.lit("user-"), F.lpad(F.col("_user").cast("string"), 6, "0")),
        "session_id": F.concat(F.lit("s-"), hex16("_session", 7)),
        "occurred_at": F.timestamp_millis(F.col("_occurred_ms")),
        "schema_version": F.lit(1),
        "device": pick(DEVICES, uniform("src", 8)),
        "page": F.when(is_view, F.concat(
            F.lit("/page/"), F.floor(F.pow(uniform("src", 9), 2) * PAGES).cast("string"))),
        "product_id": F.when(~is_view, F.concat(
            F.lit("product-"),
            F.lpad(F.floor(F.pow(uniform("src", 10), 1.5) * PRODUCTS).cast("string"), 4, "0"))),
        "quantity": F.when(~is_view, F.floor(uniform("src", 16) * 5) + 1),
        "amount": F.when(is_purchase, (F.floor(uniform("src", 17) * 49_900) + 100) / 100),
        "currency": F.when(is_purchase, F.when(F.col("country") == "GB", "GBP")
                           .when(F.col("country") == "US", "USD").otherwise("EUR")),
        "_kafka_ms": kafka_ms + copy_delay_ms,
    })
    typed = {name: F.col(name).cast(rule.spark_type)
             for name, rule in fields.items() if name != "occurred_at"}
    rows = rows.withColumns(typed)
    wire = F.struct(*(  # the event as it was on the wire (nulls are absent, like the producer's)
        F.date_format("occurred_at", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias(name)
        if name == "occurred_at" else F.col(name) for name in fields
    ))
    rows = rows.withColumns({
        "event_date": F.to_date("occurred_at"),
        "topic": F.lit(TOPIC),
        "partition": F.pmod(F.xxhash64(F.col("user_id")), F.lit(3)).cast("int"),
        "offset": F.col("id"),
        "kafka_timestamp": F.timestamp_millis(F.col("_kafka_ms")),
        "key": F.col("user_id").cast("binary"),
        "raw_value": F.to_json(wire).cast("binary"),
        "ingested_at": F.timestamp_millis(F.col("_kafka_ms") + 1500),
    })
    return rows.select(*bronze_columns(contracts))


def ensure_bronze(spark: SparkSession, settings: Settings, events: int) -> dict[str, Any]:
    """The cached bronze table of ``events`` rows (generated when missing); its description."""
    root = cache_dir(settings, events)
    marker = root / "bronze.json"
    if marker.exists():
        return json.loads(marker.read_text())
    shutil.rmtree(root, ignore_errors=True)
    path = lake_settings(settings, events).table_path(BRONZE_TABLE)
    with Stopwatch() as generating:
        (bronze_frame(spark, events).write.format("delta").mode("overwrite")
         .partitionBy("event_date").save(path))
    files = bronze_files(path)
    description = {
        "events": events, "files": len(files),
        "bytes": sum(os.path.getsize(f) for f in files),
        "generated_in_seconds": round(generating.seconds, 1),
        "interval": [START.isoformat(), END.isoformat()],
    }
    schema = spark.read.format("delta").load(path).schema
    expected = bronze_columns(ContractRegistry())
    assert schema.names == expected, f"bronze columns {schema.names} != {expected}"
    marker.write_text(json.dumps(description, indent=2))
    return description


def bronze_files(path: str) -> list[str]:
    """The Parquet files of the table's current version (what a bare reader may read)."""
    from deltalake import DeltaTable

    return sorted(uri.removeprefix("file://") for uri in DeltaTable(path).file_uris())


def shuffle_partitions(events: int) -> int:
    """Shuffle partitions for ``events`` rows (set per size; the same for every Spark variant
    and benchmark that reads them)."""
    return max(8, math.ceil(events / ROWS_PER_SHUFFLE_PARTITION))
