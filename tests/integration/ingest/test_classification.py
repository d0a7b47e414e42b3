"""Spark-side validation agrees with the contracts and the generator, record by record."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from lambdalake.contracts.registry import ContractRegistry, encode_event
from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile
from lambdalake.settings import Settings
from lambdalake.streaming.classification import classify, valid_only

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# fixed date: the records' Kafka timestamps are NOW itself (built here, not produced), and
# classification measures event age against that timestamp, not the clock
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT")


def reasons(spark: SparkSession, settings: Settings, values: list[bytes | None]) -> list[str | None]:
    rows = [(b"k", v, "t", 0, i, NOW.replace(tzinfo=None), 0) for i, v in enumerate(values)]
    classified = classify(spark.createDataFrame(rows, KAFKA_SCHEMA), ContractRegistry(),
                          settings.ingest)
    return [r.quarantine_reason for r in classified.orderBy("offset").collect()]


def test_every_generated_record_gets_the_reason_its_kind_intends(
    spark: SparkSession, settings: Settings
) -> None:
    profile = TrafficProfile(count=3000, seed=9, start_time=NOW, malformed_fraction=0.3)
    records = list(TrafficGenerator(profile).records())
    got = reasons(spark, settings, [r.value for r in records])
    expected = [None if r.kind in ("valid", "duplicate") else r.kind for r in records]
    mismatches = [(r.kind, g, r.value[:120] if r.value else r.value)
                  for r, g, e in zip(records, got, expected, strict=True) if g != e]
    assert mismatches == []


def padded(event: dict[str, object], size: int) -> dict[str, object]:
    """``event`` with an extra field that makes its encoding exactly ``size`` bytes."""
    unpadded = len(encode_event({**event, "padding": ""}))
    return {**event, "padding": "x" * (size - unpadded)}


def test_edge_cases_follow_the_contract(spark: SparkSession, settings: Settings) -> None:
    base = {"event_id": "e", "event_type": "purchase", "user_id": "u", "session_id": "s",
            "occurred_at": "2026-11-22T11:59:00.000Z", "schema_version": 1, "country": "DE",
            "device": "mobile", "product_id": "p", "quantity": 1, "amount": 9.99,
            "currency": "EUR"}
    cases = {
        "valid": (base, None),
        "newer compatible version with a new field": (
            {**base, "schema_version": 2, "coupon": "X"}, None),
        "integer amount": ({**base, "amount": 10}, None),
        "sub-cent amount": ({**base, "amount": 9.999}, "constraint_violation"),
        "quantity as a string": ({**base, "quantity": "1"}, "wrong_type"),
        "required field is JSON null": ({**base, "currency": None}, "missing_required"),
        "page on a purchase is optional": ({**base, "page": None}, None),
        "impossible date": ({**base, "occurred_at": "2026-13-01T00:00:00.000Z"},
                            "constraint_violation"),
        "ten minutes in the future": ({**base, "occurred_at": "2026-11-22T12:10:00.000Z"},
                                      "timestamp_out_of_range"),
        "a JSON array": ([base], "invalid_json"),
        "quantity beyond BIGINT": ({**base, "quantity": 10**25}, "wrong_type"),
        "schema_version 0": ({**base, "schema_version": 0}, "constraint_violation"),
        "amount a hair above a cent": ({**base, "amount": Decimal("0.010000000001")},
                                       "constraint_violation"),
        "a field of another event type is extra here": ({**base, "page": 42}, None),
        "exactly the size limit": (padded(base, settings.ingest.max_record_bytes), None),
        "a byte over the size limit": (padded(base, settings.ingest.max_record_bytes + 1),
                                       "oversized"),
    }
    values = [json.dumps(event).encode() if not isinstance(event, dict) else encode_event(event)
              for event, _ in cases.values()]
    got = dict(zip(cases, reasons(spark, settings, values), strict=True))
    assert got == {name: reason for name, (_, reason) in cases.items()}
    registry = ContractRegistry()  # the producer-side check agrees wherever it applies
    for name, (event, reason) in cases.items():
        if isinstance(event, dict) and reason in (None, "wrong_type", "missing_required",
                                                  "constraint_violation"):
            assert (registry.errors(event) == []) == (reason is None), name


def test_valid_only_keeps_the_valid_records_and_parses_each_record_once(
    spark: SparkSession, settings: Settings
) -> None:
    profile = TrafficProfile(count=500, seed=4, start_time=NOW, malformed_fraction=0.3)
    records = list(TrafficGenerator(profile).records())
    rows = [(b"k", r.value, "t", 0, i, NOW.replace(tzinfo=None), 0) for i, r in enumerate(records)]
    classified = classify(spark.createDataFrame(rows, KAFKA_SCHEMA), ContractRegistry(),
                          settings.ingest)
    valid = valid_only(classified).select("offset", "event_id")
    expected = [i for i, r in enumerate(records) if r.kind in ("valid", "duplicate")]
    assert sorted(r.offset for r in valid.collect()) == expected
    plan = valid._jdf.queryExecution().executedPlan().toString().lower()
    assert plan.count("parsejson") == 1, "the filter was pushed below classify's projections"
    # without the fence, only Spark's own guard (on by default since 4.1) stops the push-down
    spark.conf.set("spark.sql.optimizer.avoidDoubleFilterEval", "false")
    try:
        plain = classified.where("quarantine_reason IS NULL").select("offset", "event_id")
        plain_plan = plain._jdf.queryExecution().executedPlan().toString().lower()
        fenced = valid_only(classified).select("offset", "event_id")
        fenced_plan = fenced._jdf.queryExecution().executedPlan().toString().lower()
    finally:
        spark.conf.unset("spark.sql.optimizer.avoidDoubleFilterEval")
    assert plain_plan.count("parsejson") > 1
    assert fenced_plan.count("parsejson") == 1


def test_a_stream_of_valid_records_compiles_its_code_once(
    spark: SparkSession, settings: Settings, tmp_path: Path
) -> None:
    """Each micro-batch, classified anew as both streams do, runs the code compiled for the
    first: compiling the classification
    stage again per batch cost the speed layer hundreds of milliseconds and a JIT warm-up.
    (The compilation counter is the JVM's: nothing else may run Spark meanwhile.)"""
    from pyspark.sql import functions as F

    now = datetime.now(UTC).replace(microsecond=0)  # within the rate source's time bounds
    event = next(TrafficGenerator(TrafficProfile(count=1, seed=5, start_time=now)).records())
    records = spark.readStream.format("rate").option("rowsPerSecond", 200).load().select(
        F.lit(b"k").alias("key"), F.lit(event.value).alias("value"), F.lit("t").alias("topic"),
        F.lit(0).alias("partition"), F.col("value").alias("offset"), "timestamp",
        F.lit(0).alias("timestampType"))
    compilations = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    compiled: list[int] = []
    rows: list[int] = []

    contracts = ContractRegistry()

    def run_batch(batch: DataFrame, _batch_id: int) -> None:  # classified per batch, as both
        before = compilations.METRIC_COMPILATION_TIME().getCount()  # streams classify
        rows.append(valid_only(classify(batch, contracts, settings.ingest)).toArrow().num_rows)
        compiled.append(compilations.METRIC_COMPILATION_TIME().getCount() - before)

    query = (records.writeStream.foreachBatch(run_batch)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="300 milliseconds").start())
    try:
        deadline = time.monotonic() + 180
        while len(compiled) < 6:
            assert time.monotonic() < deadline and query.isActive, query.exception()
            time.sleep(0.2)
    finally:
        query.stop()
    assert compiled[0] > 0  # the first batch compiles (the metric counts)
    assert compiled[2:6] == [0, 0, 0, 0]
    assert all(count > 0 for count in rows[2:6])  # the records were valid
