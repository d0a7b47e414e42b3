"""Ingest benchmark: sustained Kafka -> bronze throughput and produce -> bronze freshness.

Throughput: a backlog of N records is put on a fresh topic; the ingest job drains it and its
per-batch history gives rows / batch time. Baseline, in the same run: a bare
confluent-kafka consumer draining the same topic (no parsing, no writes).

Gate cost: after the throughput run, the gates the batch DAG runs on bronze (its events
and its quarantine, ``gate_bronze``) validate everything ingest wrote, in one SparkSession
with the gate process's settings: once to warm up, then timed. Their time is reported
against ingest's compute time for the same records (at its sustained rate); the goal is at
most 20 % (issue #7).

Freshness: records are produced at a fixed rate while ingest runs; for every record,
freshness = commit time of the Delta version that made it visible - its Kafka timestamp
(the producer's create time). Delta's history says which files each version added, so
this is exact per record, measured after the run (nothing is added to the hot path).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
from confluent_kafka import Consumer
from deltalake import DeltaTable

from bench.common import Result, Stopwatch, fresh_run, gate_seconds, in_own_process, summary
from lambdalake.generator import TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.ingest.service import ingest_process, start_ingest_process, wait_caught_up
from lambdalake.ingest.stream import history_path
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.settings import Settings


def _run_ingest(settings: Settings, **ingest: str | int) -> None:
    start_ingest_process(settings.model_copy(update={
        "ingest": settings.ingest.model_copy(update=ingest)
    }))


def bare_consumer_drain(settings: Settings, expected: int) -> float:
    """Records per second a bare confluent-kafka consumer drains the topic at."""
    consumer = Consumer({**settings.kafka.client_config(), "group.id": f"bare-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.max.bytes": 64 * 1024 * 1024})
    consumer.subscribe([settings.kafka.events_topic.name])
    seen = 0
    started = None
    while seen < expected:
        batch = consumer.consume(10_000, timeout=5)
        if batch and started is None:
            started = time.perf_counter()
        seen += len(batch)
    elapsed = time.perf_counter() - (started or time.perf_counter())
    consumer.close()
    return seen / elapsed


def throughput(settings: Settings, records: int) -> list[Result]:
    run = fresh_run(settings, "throughput")
    profile = TrafficProfile(count=records, malformed_fraction=0.01, duplicate_fraction=0.02,
                             seed=101)
    manifest = produce_traffic(TrafficGenerator(profile),
                               EventProducer(run.kafka, run.kafka.events_topic.name))
    baseline = bare_consumer_drain(run, manifest.produced)
    with Stopwatch() as wall:
        _run_ingest(run, max_offsets_per_trigger=records // 6, trigger_interval="0 seconds")
        wait_caught_up(run, timeout=1800)
    ingest_process(run).stop(timeout=120)
    batches = [json.loads(line) for line in history_path(run).read_text().splitlines()]
    warm_up, sustained = batches[0], batches[1:]  # the first batch pays JIT and codegen
    rows = sum(b["input_rows"] for b in sustained)
    busy_seconds = sum(b["duration_ms"] for b in sustained) / 1000
    ingest_seconds = busy_seconds * manifest.produced / rows  # every record, sustained rate
    gates = in_own_process(bronze_gate_seconds, run)
    return [
        Result(name="ingest throughput (Kafka -> bronze + quarantine)", unit="records/s",
               value=rows / busy_seconds, baseline=baseline,
               baseline_name="bare confluent-kafka consumer draining the same topic",
               goal=">= 50,000 records/s sustained",
               details={"records": rows, "batches": len(sustained),
                        "busy_seconds": busy_seconds, "first_batch": warm_up,
                        "wall_seconds_incl_startup": wall.seconds}),
        Result(name=f"quality gates of bronze ({manifest.produced:,} records: events, "
                    "quarantine)", unit="s", value=gates["seconds"],
               baseline=round(ingest_seconds, 2),
               baseline_name="ingest's compute time for the same records (sustained rate)",
               goal="ratio <= 0.2 (gate time / compute time)", details=gates),
    ]


def bronze_gate_seconds(settings: Settings) -> dict[str, Any]:
    """``gate_bronze``'s two gates over every hour ingest wrote (by event and Kafka time),
    warmed up once, then timed; both must pass. Run it with ``in_own_process``."""
    from lambdalake.quality.gate import (
        GATE_SPARK_CONF,
        validate_bronze_slice,
        validate_quarantine_slice,
    )
    from lambdalake.spark import get_spark

    start, end = written_hours(settings)
    spark = get_spark("bench-gates", settings, GATE_SPARK_CONF)
    try:
        rounds = []
        for _ in range(2):
            results = [validate_bronze_slice(spark, settings, start, end),
                       validate_quarantine_slice(spark, settings, start, end)]
            rounds.append(gate_seconds(results))
    finally:
        spark.stop()
    return {"seconds": round(sum(rounds[-1].values()), 2), "seconds_by_gate": rounds[-1],
            "warm_up_seconds": rounds[0], "interval": [start.isoformat(), end.isoformat()],
            "rows": results[0].rows, "quarantined": results[1].rows}


def written_hours(settings: Settings) -> tuple[datetime, datetime]:
    """The whole hours holding every event time and Kafka time that ingest wrote."""
    bronze = DeltaTable(settings.table_path(BRONZE_TABLE)).to_pyarrow_table(
        columns=["occurred_at", "kafka_timestamp"])
    moments = [pc.min_max(bronze.column(name)) for name in bronze.column_names]
    first = min(m["min"].as_py() for m in moments)
    last = max(m["max"].as_py() for m in moments)
    start = first.replace(minute=0, second=0, microsecond=0)
    return start, last.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def freshness(settings: Settings, rate: int, seconds: int) -> Result:
    run = fresh_run(settings, f"freshness{rate}")
    _run_ingest(run, trigger_interval="0 seconds")
    wait_caught_up(run, timeout=300)  # the query is up before the clock starts
    time.sleep(3)
    profile = TrafficProfile(count=rate * seconds, rate=rate, malformed_fraction=0.0,
                             duplicate_fraction=0.0, seed=202)
    producer = EventProducer(run.kafka, run.kafka.events_topic.name, **{"linger.ms": 5})
    produce_traffic(TrafficGenerator(profile), producer)
    wait_caught_up(run, timeout=600)
    ingest_process(run).stop(timeout=120)
    delays = _visibility_delays(run)
    stats = summary(delays)
    return Result(
        name=f"ingest freshness at {rate:,} records/s (produce -> visible in bronze)",
        unit="s (p99)", value=stats["p99"], goal="p99 < 5 s at 5,000 records/s",
        details={**stats, "rate": rate, "seconds": seconds},
    )


def _visibility_delays(settings: Settings) -> list[float]:
    """Per record: commit time of the Delta version that added it - its Kafka timestamp."""
    path = settings.table_path(BRONZE_TABLE)
    table = DeltaTable(path)
    commit_time = {h["version"]: h["timestamp"] / 1000 for h in table.history()}
    delays: list[float] = []
    previous: set[str] = set()
    for version in sorted(commit_time):
        table.load_as_version(version)
        files = set(table.file_uris())
        for added in files - previous:
            column = pq.read_table(added, columns=["kafka_timestamp"]).column(0)
            for stamp in column.to_pylist():
                created = stamp.replace(tzinfo=UTC).timestamp() if isinstance(stamp, datetime) else stamp
                delays.append(commit_time[version] - created)
        previous = files
    return delays


def run(settings: Settings, profile: str) -> list[Result]:
    full = profile == "full"
    results = throughput(settings, 2_000_000 if full else 300_000)
    for rate in ((1_000, 5_000, 20_000) if full else (5_000,)):
        results.append(freshness(settings, rate, 300 if full else 30))
    return results


