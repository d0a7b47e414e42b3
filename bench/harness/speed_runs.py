"""The speed layer's measured runs, which the speed, shards and Avro benchmarks share:
freshness per view at an offered rate with consumption, lag and resources beside it
(``freshness``), a backlog drained (``throughput``), and the sustained rate over freshness
runs (``sustained_rate``).

Freshness: a catalogue of 100,000 products (and profiles for most users) is on the
entities' compacted topics before the streams start, so the speed layer bootstraps it and
the enriched views join it; the events name those products. After a 30-second warm-up at
the same rate, consumed by both streams (the first batches with data pay code generation
and JIT compilation), records are produced at a fixed rate while ingest and the speed
application run. For each view and each record the view
reads, freshness = commit time of the Delta version of the real-time table written by the
micro-batch that consumed the record - the record's Kafka timestamp (the producer's create
time). Which batch consumed which offsets is in the query's checkpoint
(``offsets/<batch>``), which Delta version a batch wrote is in the table's log (the ``txn``
action), so this is exact per record and measured after the run (nothing is added to the hot
path). Served freshness goes one step further, to the query API (``make up``'s
``serving-api``, merging at read time): a poller asks its ``/freshness`` every 50 ms which
real-time Delta version each view's snapshot holds, and a record is visible from the first
poll that shows the version its batch wrote. Baseline, in the same run: a bare
confluent-kafka consumer's receive time - create time for the same records.

Throughput: a backlog is put on a fresh topic and drained by the speed application; the
rate is records / time between the end of each query's first (warm-up) batch and its last.
Baseline: a bare consumer draining the same topic.

Beside each freshness run: how many records per second the speed layer consumed against
the offered rate, whether its lag grew (the lag after each micro-batch = records produced
by the time its commit log entry was written - records it had consumed; the least-squares
slope after the run's first tenth, held to 1 % of the offered rate), and the memory (idle, peak) and
cores of each process of the stack and of the benchmark's own (its producer, bare consumer and
poller take cores the stack shares). The sustained rate is the highest offered rate whose
run (5 minutes in the full profile) kept the lag from growing. Ingest runs as the stack runs
it, at a lower CPU priority (``ingest.niceness``); its lag is measured the same way and
reported beside the speed layer's (``ingest``), since it may fall behind while CPU is short,
and so is its freshness (produce -> visible in bronze, every record of the run).
"""

from __future__ import annotations

import bisect
import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx
from confluent_kafka import Consumer

from bench.harness.common import (
    BenchmarkProcess,
    Measured,
    Plot,
    ResourceSampler,
    Result,
    Stopwatch,
    backlog,
    consumption,
    distribution,
    drain_timeout,
    fresh_run,
    summary,
)
from bench.harness.ingest_runs import bare_consumer_drain, visibility_delays
from lambdalake.generator.catalogue import Catalogue
from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.ingest.status import QUERY_NAME as INGEST
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.lake.delta_rs import table_version
from lambdalake.operations.traffic import reference_producers, traffic_generator
from lambdalake.serving.service import ServingService
from lambdalake.settings import Settings
from lambdalake.speed.realtime import realtime_table
from lambdalake.speed.service import SpeedLayer, wait_speed_caught_up
from lambdalake.speed.shards import APP, Shard, shards, speed_status
from lambdalake.speed.stream import query_name
from lambdalake.stack.kafka_broker import KafkaCluster
from lambdalake.streaming.progress import progress_time, read_history
from lambdalake.streaming.service import StreamingService, wait_caught_up
from lambdalake.views.definition import ViewDefinition, load_views

Record = tuple[int, int, float, str]  # partition, offset, Kafka create time (s), event type


def _records(settings: Settings, expected: int) -> Iterator[Record]:
    """Every record now in the topic, read back with a bare consumer."""
    consumer = Consumer({**settings.kafka.client_config(), "group.id": f"read-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([settings.kafka.events_topic.name])
    seen = 0
    try:
        while seen < expected:
            for message in consumer.consume(10_000, timeout=5):
                seen += 1
                event_type = json.loads(message.value()).get("event_type", "")
                yield message.partition(), message.offset(), message.timestamp()[1] / 1000, \
                    event_type
    finally:
        consumer.close()


KEEP_EVERY_BATCH = {"spark.sql.streaming.minBatchesToRetain": "1000000"}
"""Spark keeps the offsets of the last 100 batches by default; a freshness run maps every
record to the batch that consumed it, so it keeps them all."""


def _batch_ends(checkpoint: Path, topic: str) -> dict[int, list[tuple[int, int]]]:
    """Per partition, sorted (end offset, batch id) of every batch in the checkpoint."""
    ends: dict[int, list[tuple[int, int]]] = {}
    batches = [int(path.name) for path in (checkpoint / "offsets").iterdir()
               if path.name.isdigit()]
    if min(batches) != 0:  # a purged batch's records would count as the next one's
        raise RuntimeError(f"{checkpoint}: the offset log starts at batch {min(batches)}; "
                           "Spark purged earlier batches (spark.sql.streaming.minBatchesToRetain)")
    for batch in batches:
        lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
        for partition, end in json.loads(lines[2])[topic].items():
            ends.setdefault(int(partition), []).append((int(end), batch))
    return {p: sorted(v) for p, v in ends.items()}


def lag_after_batches(checkpoint: Path, topic: str, created: list[float],
                      start: dict[int, int]) -> list[tuple[float, int]]:
    """(time, lag) after each micro-batch that ended while records were being produced:
    records created by the time the batch's commit log entry was written, minus records
    consumed from ``start`` (per partition) up to the batch's end offsets. ``created`` is
    sorted."""
    ends_of: dict[int, dict[int, int]] = {}  # batch -> partition -> end offset
    for partition, batches in _batch_ends(checkpoint, topic).items():
        for end, batch in batches:
            ends_of.setdefault(batch, {})[partition] = end
    samples = []
    for batch, ends in sorted(ends_of.items()):
        commit = checkpoint / "commits" / str(batch)
        if not commit.is_file():  # the batch did not finish
            continue
        finished = commit.stat().st_mtime
        if not created[0] <= finished <= created[-1]:
            continue
        consumed = sum(max(0, end - start.get(partition, 0)) for partition, end in ends.items())
        samples.append((finished, bisect.bisect_right(created, finished) - consumed))
    return samples


LAG_GROWTH_LIMIT = 0.01
"""A stream keeps up while its lag grows by less than 1 % of the offered rate per second."""
RAMP_FRACTION = 0.1
"""The first tenth of a run is left out of the slope: there the lag rises from nothing to
its steady level (rate x micro-batch time), which is not growth."""


def lag_growth(samples: list[tuple[float, int]]) -> float | None:
    """Records per second by which the lag grew after the run's first tenth (least-squares
    slope); None when fewer than two micro-batches ended in that time (the stream did not
    keep up)."""
    if not samples:
        return None
    first, last = samples[0][0], samples[-1][0]
    kept = [sample for sample in samples if sample[0] >= first + RAMP_FRACTION * (last - first)]
    if len(kept) < 2:
        return None
    times, lags = zip(*kept, strict=True)
    return statistics.linear_regression(times, lags).slope


def lag_figures(samples: list[list[tuple[float, int]]], offered: float) -> dict[str, Any]:
    """Whether the lag of every query (``samples``: one list per query) held while
    ``offered`` records per second arrived, with the figures behind the verdict."""
    growths = [lag_growth(query) for query in samples]
    growth = None if None in growths else max(growths)
    return {
        "lag_growth_per_second": None if growth is None else round(growth, 1),
        "lag_max": max((lag for query in samples for _, lag in query), default=None),
        "lag_samples": min(len(query) for query in samples),
        "sustained": growth is not None and growth <= LAG_GROWTH_LIMIT * offered,
    }


def _commits(table: Path) -> dict[tuple[str, int], tuple[int, float]]:
    """(writer's app id, batch id) -> (Delta version, commit time in s) of the commit that
    batch wrote (its txn); each shard writes as an app id of its own."""
    commits: dict[tuple[str, int], tuple[int, float]] = {}
    for path in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in path.read_text().splitlines() if line]
        txn = next((a["txn"] for a in actions if "txn" in a), None)
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), None)
        if txn and info:
            commits[(txn["appId"], int(txn["version"]))] = (int(path.stem),
                                                            info["timestamp"] / 1000)
    return commits


def _app_id(checkpoint: Path, query: str) -> str:
    """The app id a speed query writes its real-time tables' transactions as (the query id
    is in its checkpoint's metadata file)."""
    return f"lambdalake-{query}-{json.loads((checkpoint / 'metadata').read_text())['id']}"


def _checkpoint(settings: Settings, shard: Shard, view: ViewDefinition) -> Path:
    return Path(settings.checkpoint_path(shard.checkpoint(query_name(view))))


Polls = list[tuple[float, dict[str, int | None]]]  # (time, view -> real-time version served)


def _poll_served_versions(settings: Settings, stop: threading.Event, polls: Polls) -> None:
    with httpx.Client(base_url=settings.serving.base_url, timeout=5) as client:
        while not stop.is_set():
            answer = client.get("/freshness").json()
            polls.append((time.time(), {view: fresh["realtime_delta_version"]
                                        for view, fresh in answer.items()}))
            stop.wait(0.05)


def view_freshness(settings: Settings, view: ViewDefinition, records: list[Record],
                   polls: Polls) -> tuple[list[float], list[float]]:
    """Per record of the view: (committed - created, visible in the API - created)."""
    topic = settings.kafka.events_topic.name
    ends: dict[int, list[tuple[int, int]]] = {}  # partition -> (end offset, batch id)
    writer: dict[int, str] = {}  # partition -> app id of the shard that owns it
    for shard in shards(settings):
        checkpoint = _checkpoint(settings, shard, view)
        owned = _batch_ends(checkpoint, topic)
        ends |= owned
        writer |= dict.fromkeys(owned, _app_id(checkpoint, query_name(view)))
    commits = _commits(Path(settings.table_path(realtime_table(view))))
    served = [-1 if (version := versions.get(view.name)) is None else version  # -1: no table
              for _, versions in polls]
    readable, visible = [], []
    for partition, offset, created, event_type in records:
        if event_type not in view.event_types:
            continue
        index = bisect.bisect_right(ends[partition], (offset, float("inf")))
        batch = ends[partition][index][1]  # the first batch whose end is past the offset
        version, committed = commits[(writer[partition], batch)]  # it had this view's rows
        readable.append(committed - created)
        first = bisect.bisect_left(served, version)  # versions served only grow
        visible.append(polls[first][0] - created if first < len(polls) else float("inf"))
    return readable, visible


def _bare_delays(settings: Settings, stop: threading.Event, delays: list[float]) -> None:
    consumer = Consumer({**settings.kafka.client_config(), "group.id": f"bare-{uuid.uuid4()}",
                         "auto.offset.reset": "latest", "enable.auto.commit": False})
    consumer.subscribe([settings.kafka.events_topic.name])
    while not stop.is_set():
        for message in consumer.consume(1000, timeout=0.2):
            delays.append(time.time() - message.timestamp()[1] / 1000)
    consumer.close()


def _start(run: Settings) -> None:
    StreamingService(run, INGEST).start(timeout=300)
    SpeedLayer(run).start(timeout=300)
    ServingService(run).start()


def _measured_processes(run: Settings, bench: Settings) -> dict[str, Measured]:
    """The processes a freshness run measures, by name (each speed shard's), and the
    benchmark's own beside them. The run's streams and API live in its own state dir; the
    broker is the benchmark's, in ``bench``'s."""
    return {INGEST: StreamingService(run, INGEST).process,
            **{process.name: process for process in SpeedLayer(run).processes},
            "serving-api": ServingService(run).process,
            "kafka": KafkaCluster(bench).nodes[0].process,
            "benchmark": BenchmarkProcess()}


def _stop(run: Settings) -> None:
    ServingService(run).stop()
    SpeedLayer(run).stop()
    StreamingService(run, INGEST).stop()


WARM_UP_SECONDS = 30
"""Traffic at the measured rate before the measurement, which starts once both streams
have consumed it. The JVMs compile the classification stage's hot code during the first
batches (measured: 20 to 30 s of slower batches at 5,000 events/s after a 10 s warm-up)."""


REFERENCE_PRODUCTS = 100_000
"""The catalogue the enriched views join during a freshness run: every product the events
name, and a profile for most users, on the entities' compacted topics before the speed layer
starts (so it bootstraps them)."""


def produce_catalogue(run: Settings) -> int:
    """Send the freshness runs' reference data; return how many records."""
    profile = TrafficProfile(products=REFERENCE_PRODUCTS)
    catalogue = Catalogue(profile.products, profile.users, seed=301,
                          start=datetime.now(UTC))
    producers = reference_producers(run)
    sent = 0
    for change in catalogue.initial():
        producers[change.entity].send(change.key.encode(), change.encoded())
        sent += 1
    assert all(producer.flush() == 0 for producer in producers.values())
    return sent


def status_reference(run: Settings) -> dict[str, Any]:
    """The speed layer's reference state as its last status reported it."""
    return dict(speed_status(run).get("reference") or {})


def freshness(settings: Settings, rate: int, seconds: int, shard_count: int = 1
              ) -> list[Result]:
    """Freshness, consumption and resources at ``rate`` offered, with ``shard_count`` speed
    shards (figures named by the shard count when there are several)."""
    run = fresh_run(settings, f"speed{rate}x{shard_count}")
    run.speed.shards = shard_count
    of = "" if shard_count == 1 else f", {shard_count} speed shards"
    run.speed.trigger_interval = "0 seconds"
    run.spark.extra_conf = {**run.spark.extra_conf, **KEEP_EVERY_BATCH}
    views = load_views()
    reference_records = produce_catalogue(run)
    _start(run)
    producer = EventProducer(run.kafka, run.kafka.events_topic.name, **{"linger.ms": 5})
    try:  # warm-up: the first batches with data pay code generation and JIT compilation
        produce_traffic(TrafficGenerator(TrafficProfile(
            count=rate * WARM_UP_SECONDS, rate=rate, malformed_fraction=0.0,
            duplicate_fraction=0.0, late_fraction=0.0, seed=302,
            products=REFERENCE_PRODUCTS)), producer)
        wait_caught_up(run, INGEST, timeout=600)
        bronze_warmed = table_version(run.table_path(BRONZE_TABLE))
        warm = wait_speed_caught_up(run, timeout=600)
        stop, bare, polls = threading.Event(), [], []
        listener = threading.Thread(target=_bare_delays, args=(run, stop, bare))
        poller = threading.Thread(target=_poll_served_versions, args=(run, stop, polls))
        listener.start()
        poller.start()
        time.sleep(2)
        profile = TrafficProfile(count=rate * seconds, rate=rate, malformed_fraction=0.0,
                                 duplicate_fraction=0.0, late_fraction=0.0, seed=303,
                                 products=REFERENCE_PRODUCTS)
        with ResourceSampler(_measured_processes(run, settings)) as resources:
            with Stopwatch() as producing:
                manifest = produce_traffic(TrafficGenerator(profile), producer)
            with Stopwatch() as draining:
                wait_speed_caught_up(run, timeout=drain_timeout(manifest.produced))
        time.sleep(2)  # the last commits reach the API's snapshots
        stop.set()
        listener.join()
        poller.join()
        wait_caught_up(run, INGEST, timeout=drain_timeout(manifest.produced))
    finally:
        _stop(run)
    topic = run.kafka.events_topic.name
    records = [r for r in _records(run, manifest.produced + sum(warm.values()))
               if r[1] >= warm[f"{topic}:{r[0]}"]]  # the measured run only
    baseline = summary(bare)
    offered = manifest.produced / producing.seconds
    kept_up = consumption("speed" if shard_count == 1 else f"speed ({shard_count} shards)",
                          rate, offered, manifest.produced,
                          producing.seconds + draining.seconds)
    start = {int(key.rsplit(":", 1)[1]): offset for key, offset in warm.items()}
    created = sorted(record[2] for record in records)
    layout = shards(run)
    owned = {shard: set(shard.partitions(run.kafka.events_topic.partitions)) for shard in layout}
    lags = [lag_after_batches(_checkpoint(run, shard, view), topic,
                              sorted(r[2] for r in records if r[0] in owned[shard]),
                              {p: o for p, o in start.items() if p in owned[shard]})
            for shard in layout
            for view in {query_name(v): v for v in views.values()}.values()]
    ingest_lag = lag_after_batches(Path(run.checkpoint_path(INGEST)), topic, created, start)
    kept_up.details.update({"offered_rate": rate, "seconds_offered": seconds,
                            "shards": shard_count,
                            **lag_figures(lags, offered),
                            "ingest": lag_figures([ingest_lag], offered)})
    results = [
        kept_up,
        _bronze_freshness(run, bronze_warmed, manifest.acknowledged, rate, of),
        Result(name=f"speed layer CPU at {rate:,} events/s (ingest beside it){of}",
               unit=f"cores of {os.cpu_count()}",
               value=round(sum(resources.cores[shard.app] for shard in layout), 2),
               details=resources.figures()),
    ]
    details = {"rate_asked": rate, "rate_produced": round(offered), "seconds": seconds,
               "bare_consumer": baseline, "reference_records": reference_records,
               "reference_state": status_reference(run)}
    for view in views.values():
        readable, visible = view_freshness(run, view, records, polls)
        for what, delays, goal, series in (
            ("readable in Delta", readable, "p99 < 3 s at 5,000 events/s", f"speed {view.name}"),
            ("visible in the query API", visible, "p99 < 3 s at 5,000 events/s (serving issue)",
             f"API {view.name}"),
        ):
            stats = summary(delays)
            shape = {"distribution": distribution(delays)} if what.endswith("API") else {}
            results.append(Result(
                name=f"freshness, {view.name}, at {rate:,} events/s (produce -> {what}){of}",
                unit="s (p99)", value=stats["p99"], baseline=baseline["p99"],
                baseline_name="bare consumer: receive - create time, same records",
                goal=goal, details={**stats, **details, **shape},
                plot=Plot("freshness", series + of, rate),
            ))
    return results


def _bronze_freshness(run: Settings, warmed: int, acknowledged: int, rate: int, of: str
                      ) -> Result:
    """Ingest's freshness beside the speed layer: per record of the measured run, the bronze
    commit that added it - its Kafka timestamp (``bench.harness.ingest_runs.visibility_delays``)."""
    delays = visibility_delays(run, after_version=warmed)
    if len(delays) != acknowledged:  # records lost or doubled: no figure to publish
        raise AssertionError(f"bronze gained {len(delays):,} records after the warm-up; "
                             f"Kafka acknowledged {acknowledged:,} of the run's")
    stats = summary(delays)
    return Result(
        name=f"ingest freshness beside the speed layer at {rate:,} events/s "
             f"(produce -> visible in bronze){of}",
        unit="s (p99)", value=stats["p99"], goal="p99 < 5 s at 5,000 records/s",
        details={**stats, "rate": rate, "distribution": distribution(delays)},
        plot=Plot("freshness", "ingest -> bronze, beside the speed layer" + of, rate))


def throughput(settings: Settings, records: int,
               events_format: Literal["json", "avro"] = "json") -> Result:
    run = fresh_run(settings, f"speedthroughput{events_format}", events_format)
    run.speed.trigger_interval = "0 seconds"
    run.speed.max_offsets_per_trigger = records // 8
    profile = backlog(records, malformed_fraction=0.01, duplicate_fraction=0.02, seed=404)
    manifest = produce_traffic(traffic_generator(run, profile),
                               EventProducer(run.kafka, run.kafka.events_topic.name))
    baseline = bare_consumer_drain(run, manifest.produced)
    SpeedLayer(run).start(timeout=300)
    try:
        wait_speed_caught_up(run, timeout=drain_timeout(manifest.produced))
    finally:
        SpeedLayer(run).stop()
    history = read_history(run, APP)
    per_query = {}
    for query in {entry["query"] for entry in history}:
        batches = sorted((e for e in history if e["query"] == query), key=lambda e: e["batch_id"])
        first, rest = batches[0], batches[1:]
        first_end = progress_time(first["timestamp"]) + first["duration_ms"] / 1000
        last_end = progress_time(rest[-1]["timestamp"]) + rest[-1]["duration_ms"] / 1000
        per_query[query] = sum(e["input_rows"] for e in rest) / (last_end - first_end)
    return Result(
        name=f"speed throughput (Kafka -> {len(load_views())} real-time views, backlog drained)"
             + (", Avro events" if events_format == "avro" else ""),
        unit="records/s", value=min(per_query.values()), baseline=baseline,
        baseline_name="bare confluent-kafka consumer draining the same topic",
        goal="reference: a backlog, nothing beside it (the goal is the sustained rate)",
        details={"records": manifest.produced, "per_query_records_per_second": per_query},
    )


def sustained_rate(consumptions: list[Result], of: str = "") -> Result:
    """The highest offered rate the speed layer kept up with, as every lower rate (its lag
    did not grow): a lower rate that failed caps it, whatever a higher one did."""
    runs = sorted(consumptions, key=lambda r: r.details["offered_rate"])
    sustained = 0
    for run_at in runs:
        if not run_at.details["sustained"]:
            break
        sustained = run_at.details["offered_rate"]
    seconds = max(r.details["seconds_offered"] for r in runs)
    return Result(
        name=f"speed sustained rate ({seconds} s per rate, ingest beside it, lag not "
             f"growing){of}",
        unit="events/s", value=sustained, goal=">= 20,000 events/s sustained for 5 minutes",
        details={f"{r.details['offered_rate']:,}/s": {
            key: r.details[key]
            for key in ("lag_growth_per_second", "lag_max", "lag_samples", "sustained", "ingest")
        } | {"consumed_per_second": round(r.value)} for r in runs},
    )

