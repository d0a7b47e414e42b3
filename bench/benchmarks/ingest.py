"""Ingest benchmark: sustained Kafka -> bronze throughput and produce -> bronze freshness.

Throughput: a backlog of N records is put on a fresh topic; the ingest job drains it and its
per-batch history gives rows / batch time (``bench.harness.ingest_runs.drain``). Two
baselines, in the same run: a bare confluent-kafka consumer draining the same topic (no
parsing, no writes; ``bare_consumer_drain``), and what a user would write first: a bare
Structured Streaming query, in a Spark driver of its own with the platform's settings,
appending the same topic's raw records to a Delta table with the same trigger and batch size
(no classification, no quarantine, no idempotent commits); both Spark figures count the
sustained batches (the first warms up the JVM).

Gate cost: after the throughput run, the gates the batch DAG runs on bronze (its events
and its quarantine, ``gate_bronze``) validate everything ingest wrote, in one SparkSession
with the gate process's settings: once to warm up, then timed. Their time is reported
against ingest's compute time for the same records (at its sustained rate); the goal is at
most 20 % (issue #7).

Hostile input: the same drain over clean traffic and over traffic with 10 % malformed
records (every kind the generator makes), same size and seed; valid events per second are
compared, and every malformed record must be in quarantine under its kind's reason.

Freshness: records are produced at a fixed rate while ingest runs; for every record,
freshness = commit time of the Delta version that made it visible - its Kafka timestamp (the
producer's create time). Delta's history says which files each version added
(``bench.harness.ingest_runs.visibility_delays``), so this is exact per record, measured
after the run (nothing is added to the hot path). A warm-up at the same rate comes first and
is not measured: the first micro-batches with data compile the classification stage (about
20 s here), which a running ingest paid long before.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pyarrow.compute as pc
from deltalake import DeltaTable

from bench.harness.common import (
    Plot,
    Result,
    Stopwatch,
    backlog,
    consumption,
    distribution,
    drain_timeout,
    fresh_run,
    gate_seconds,
    in_own_process,
    summary,
)
from bench.harness.ingest_runs import bare_consumer_drain, drain, run_ingest, visibility_delays
from lambdalake.generator.traffic import (
    MALFORMED_KINDS,
    TrafficGenerator,
    TrafficProfile,
    produce_traffic,
)
from lambdalake.ingest.service import IngestService, wait_caught_up
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_TABLE
from lambdalake.settings import Settings

WARM_UP_SECONDS = 30
"""Traffic at the measured rate before a freshness run (as the speed benchmark's)."""


def bare_streaming_drain(settings: Settings, expected: int, max_offsets: int) -> float:
    """Records per second of a bare Structured Streaming query appending the topic's raw
    Kafka records to a Delta table (sustained batches); run it ``in_own_process``."""
    from lambdalake.spark import get_spark
    from lambdalake.streaming.events import kafka_stream

    spark = get_spark("bench-bare-streaming", settings)
    query = (kafka_stream(spark, settings, max_offsets).writeStream.format("delta")
             .option("checkpointLocation", settings.checkpoint_path("bare_streaming"))
             .trigger(processingTime="0 seconds")
             .start(settings.table_path("bare_streaming")))
    batches: dict[int, tuple[int, float]] = {}
    deadline = time.monotonic() + drain_timeout(expected)
    while sum(rows for rows, _ in batches.values()) < expected:
        if time.monotonic() > deadline or query.exception() is not None:
            query.stop()
            raise RuntimeError(f"bare streaming query: {query.exception() or 'timed out'}")
        for progress in query.recentProgress:
            if progress["numInputRows"]:
                batches[progress["batchId"]] = (progress["numInputRows"],
                                                progress["durationMs"]["triggerExecution"] / 1000)
        time.sleep(0.5)
    query.stop()
    sustained = [batches[batch] for batch in sorted(batches)[1:]]
    return sum(rows for rows, _ in sustained) / sum(seconds for _, seconds in sustained)


def throughput(settings: Settings, records: int) -> list[Result]:
    drained = drain(settings, "throughput", backlog(
        records, malformed_fraction=0.01, duplicate_fraction=0.02, seed=101))
    run, produced = drained.run, drained.manifest.produced
    quarantined = sum(quarantine_reasons(run).values())
    if quarantined != drained.manifest.malformed:  # else it measured the wrong traffic
        raise AssertionError(f"{quarantined:,} records quarantined, "
                             f"{drained.manifest.malformed:,} produced malformed")
    baseline = bare_consumer_drain(run, produced)
    streaming = in_own_process(bare_streaming_drain, run, produced, records // 6)
    ingest_seconds = drained.busy_seconds * produced / drained.rows  # every record, sustained
    gates = in_own_process(bronze_gate_seconds, run)
    return [
        Result(name="ingest throughput (Kafka -> bronze + quarantine)", unit="records/s",
               value=drained.rate, baseline=baseline,
               baseline_name="bare confluent-kafka consumer draining the same topic",
               goal=">= 50,000 records/s sustained",
               details={"records": drained.rows, "batches": drained.batches,
                        "busy_seconds": drained.busy_seconds, "first_batch": drained.first_batch,
                        "wall_seconds_incl_startup": drained.wall_seconds}),
        Result(name="ingest throughput against bare Structured Streaming to Delta",
               unit="records/s", value=drained.rate, baseline=streaming,
               baseline_name="a bare Structured Streaming query appending the same topic's "
                             "raw records to Delta, same trigger and batch size",
               goal="ratio >= 0.8"),
        Result(name=f"quality gates of bronze ({produced:,} records: events, quarantine)",
               unit="s", value=gates["seconds"], baseline=round(ingest_seconds, 2),
               baseline_name="ingest's compute time for the same records (sustained rate)",
               goal="ratio <= 0.2 (gate time / compute time)", details=gates),
    ]


def hostile_input(settings: Settings, records: int, malformed: float = 0.10) -> Result:
    """Valid events/s with ``malformed`` of the traffic bad (every kind the generator makes)
    against clean traffic of the same size and seed; every bad record must be quarantined."""
    clean = drain(settings, "clean", backlog(
        records, malformed_fraction=0.0, duplicate_fraction=0.02, seed=303))
    hostile = drain(settings, "hostile", backlog(
        records, malformed_fraction=malformed, duplicate_fraction=0.02, seed=303))
    produced = {k: n for k, n in hostile.manifest.counts.items() if k in MALFORMED_KINDS}
    reasons = quarantine_reasons(hostile.run)
    if reasons != produced:  # each kind's records quarantined, under that kind's reason
        raise AssertionError(f"malformed records produced by kind: {produced}; "
                             f"quarantined by reason: {reasons}")
    return Result(
        name=f"valid events/s through ingest with {malformed:.0%} malformed traffic",
        unit="valid events/s", value=hostile.valid_rate, baseline=clean.valid_rate,
        baseline_name="the same ingest on clean traffic (same size, seed, duplicates)",
        goal="ratio >= 0.8 (within 20 % of clean traffic)",
        details={"records": records, "malformed": hostile.manifest.malformed,
                 "malformed_by_kind": produced,
                 "quarantined_by_reason": reasons,
                 "records_per_second": {"hostile": hostile.rate, "clean": clean.rate}})


def quarantine_reasons(settings: Settings) -> dict[str | None, int]:
    reasons = DeltaTable(settings.table_path(QUARANTINE_TABLE)).to_pyarrow_table(
        columns=["quarantine_reason"]).column(0)
    return {row["values"]: row["counts"] for row in reasons.value_counts().to_pylist()}


def bronze_gate_seconds(settings: Settings) -> dict[str, Any]:
    """``gate_bronze``'s two gates over every hour ingest wrote (by event and Kafka time),
    warmed up once, then timed; both must pass. Run it with ``in_own_process``."""
    from lambdalake.quality.gate import GATE_SPARK_CONF
    from lambdalake.quality.slices import validate_bronze_slice, validate_quarantine_slice
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


def freshness(settings: Settings, rate: int, seconds: int) -> list[Result]:
    run = fresh_run(settings, f"freshness{rate}")
    run_ingest(run, trigger_interval="0 seconds")
    wait_caught_up(run, timeout=300)  # the query is up before the clock starts
    producer = EventProducer(run.kafka, run.kafka.events_topic.name, **{"linger.ms": 5})

    def traffic(duration: int, seed: int) -> TrafficProfile:
        return TrafficProfile(count=rate * duration, rate=rate, malformed_fraction=0.0,
                              duplicate_fraction=0.0, seed=seed)

    warm_up = produce_traffic(TrafficGenerator(traffic(WARM_UP_SECONDS, 201)), producer)
    wait_caught_up(run, timeout=drain_timeout(warm_up.produced))
    warmed = DeltaTable(run.table_path(BRONZE_TABLE)).version()
    with Stopwatch() as producing:
        manifest = produce_traffic(TrafficGenerator(traffic(seconds, 202)), producer)
    with Stopwatch() as draining:
        wait_caught_up(run, timeout=drain_timeout(manifest.produced))
    IngestService(run).stop()
    delays = visibility_delays(run, after_version=warmed)
    stats = summary(delays)
    offered = manifest.produced / producing.seconds
    return [
        Result(name=f"ingest freshness at {rate:,} records/s (produce -> visible in bronze)",
               unit="s (p99)", value=stats["p99"], goal="p99 < 5 s at 5,000 records/s",
               details={**stats, "rate": rate, "seconds": seconds,
                        "distribution": distribution(delays)},
               plot=Plot("freshness", "ingest -> bronze", rate)),
        consumption("ingest", rate, offered, manifest.produced,
                    producing.seconds + draining.seconds),
    ]


def run(settings: Settings, profile: str) -> list[Result]:
    full = profile == "full"
    results = throughput(settings, 2_000_000 if full else 300_000)
    results.append(hostile_input(settings, 1_000_000 if full else 150_000))
    for rate in ((1_000, 5_000, 20_000) if full else (5_000,)):
        results += freshness(settings, rate, 300 if full else 30)
    return results


