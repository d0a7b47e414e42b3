"""Avro against JSON, same events, same run: what the wire format costs ingest and the
speed layer, and what the schema registry holds in memory.

Three figures, each beside its JSON baseline measured in the same run:
- classification alone: the same valid events as JSON and as Avro classified by one warm
  SparkSession (the decode-and-check step both streams share), best of three;
- ingest draining a backlog of the same traffic (same profile and seed), as ``ingest``'s
  throughput benchmark does (``bench.harness.ingest_runs.drain``);
- the speed layer draining it, as ``speed``'s throughput benchmark does
  (``bench.harness.speed_runs.throughput``).
The registry's resident memory is read after all of it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from bench.harness import ingest_runs, speed_runs
from bench.harness.common import Result, backlog, fresh_run, in_own_process
from lambdalake.contracts.registry import ContractRegistry
from lambdalake.kafka.registry_server import LocalSchemaRegistry
from lambdalake.kafka.schema_registry import TopicSchemas
from lambdalake.operations.traffic import traffic_generator
from lambdalake.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KAFKA_SCHEMA = ("key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
                "timestamp TIMESTAMP, timestampType INT")


def classification_seconds(settings: Settings, records: int) -> dict[str, float]:
    """Seconds to classify the same events as JSON and as Avro (best of three, warm);
    run it ``in_own_process``."""
    from lambdalake.spark import get_spark
    from lambdalake.streaming.classification import classify

    spark = get_spark("bench-avro-classification", settings)
    contracts = ContractRegistry()
    profile = backlog(records, malformed_fraction=0.0, duplicate_fraction=0.0, seed=505)
    seconds = {}
    for events_format in ("json", "avro"):
        run = fresh_run(settings, f"classify{events_format}", events_format)
        values = [r.value for r in traffic_generator(run, profile).records()]
        rows = [(b"k", v, "t", 0, i, None, 0) for i, v in enumerate(values)]
        frame = spark.createDataFrame(rows, KAFKA_SCHEMA).cache()
        frame.count()
        schemas = TopicSchemas(run.registry, contracts, run.kafka.events_topic.name).current()
        timings = []
        for _ in range(4):  # the first compiles
            started = time.perf_counter()
            valid = _valid_count(classify(frame, contracts, run.ingest, schemas))
            timings.append(time.perf_counter() - started)
        if valid != records:
            raise AssertionError(f"{events_format}: {valid} of {records} events valid")
        seconds[events_format] = min(timings[1:])
        frame.unpersist()
    return seconds


def _valid_count(classified: DataFrame) -> int:
    return classified.where("quarantine_reason IS NULL").count()


def run(settings: Settings, profile: str) -> list[Result]:
    full = profile == "full"
    records = 1_000_000 if full else 150_000
    classified = in_own_process(classification_seconds, settings, 200_000 if full else 50_000)
    results = [Result(
        name="classification of the same events as Avro (decode + contract checks)",
        unit="s", value=classified["avro"], baseline=classified["json"],
        baseline_name="the same events as JSON, same SparkSession (best of three, warm)",
        goal="report (Avro is expected to decode faster)",
        details={"records": 200_000 if full else 50_000})]
    drains = {fmt: ingest_runs.drain(settings, f"avro-ingest-{fmt}", backlog(
        records, malformed_fraction=0.01, duplicate_fraction=0.02, seed=606), fmt)
        for fmt in ("json", "avro")}
    results.append(Result(
        name="ingest throughput with Avro events", unit="records/s",
        value=drains["avro"].rate, baseline=drains["json"].rate,
        baseline_name="the same ingest over the same traffic as JSON",
        goal="report", details={fmt: {"records": d.rows, "batches": d.batches,
                                      "busy_seconds": d.busy_seconds}
                                for fmt, d in drains.items()}))
    json_speed = speed_runs.throughput(settings, records, "json")
    avro_speed = speed_runs.throughput(settings, records, "avro")
    results.append(Result(
        name="speed throughput with Avro events", unit="records/s", value=avro_speed.value,
        baseline=json_speed.value, baseline_name="the same speed layer over the same traffic "
        "as JSON", goal="report", details={"json": json_speed.details,
                                           "avro": avro_speed.details}))
    registry = LocalSchemaRegistry(settings)
    results.append(Result(
        name="schema registry resident memory (Apicurio, KafkaSQL)", unit="MiB",
        value=registry.process.rss_bytes() / 2**20, goal="report",
        details={"subjects": len(registry_subjects(settings))}))
    return results


def registry_subjects(settings: Settings) -> list[str]:
    from lambdalake.kafka.schema_registry import registry_client

    return list(registry_client(settings.registry).get_subjects())
