"""Ingest's runs and readings that more than one benchmark measures with: ingest started
with some of its settings changed, a timed drain of a backlog (the ingest and Avro
benchmarks), the bare consumer that drains the same topic as its baseline (the speed
layer's too), and each record's delay to visibility in bronze (ingest's freshness, alone
and beside the speed layer)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import pyarrow.parquet as pq
from confluent_kafka import Consumer
from deltalake import DeltaTable

from bench.harness.common import Stopwatch, drain_timeout, fresh_run
from lambdalake.generator.traffic import Manifest, TrafficProfile, produce_traffic
from lambdalake.ingest.service import IngestService, start_ingest_process, wait_caught_up
from lambdalake.ingest.status import history_path
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.operations.traffic import traffic_generator
from lambdalake.settings import Settings


def run_ingest(settings: Settings, **ingest: str | int) -> None:
    """Start ingest's process with these of its settings changed (trigger, batch size)."""
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


@dataclass(frozen=True)
class Drain:
    """One ingest run over a backlog: what was produced and the sustained batches' work."""

    run: Settings
    manifest: Manifest
    rows: int  # records in the sustained batches (the first one warms up the JVM)
    busy_seconds: float
    batches: int
    first_batch: dict[str, Any]
    wall_seconds: float

    @property
    def rate(self) -> float:
        return self.rows / self.busy_seconds

    @property
    def valid_rate(self) -> float:
        """Valid events per second: records/s times the traffic's valid share."""
        return self.rate * (1 - self.manifest.malformed / self.manifest.produced)


def drain(settings: Settings, name: str, profile: TrafficProfile,
          events_format: Literal["json", "avro"] = "json") -> Drain:
    """Produce ``profile`` as a backlog on a fresh topic (as ``events_format``), then time
    ingest draining it."""
    run = fresh_run(settings, name, events_format)
    manifest = produce_traffic(traffic_generator(run, profile),
                               EventProducer(run.kafka, run.kafka.events_topic.name))
    with Stopwatch() as wall:
        run_ingest(run, max_offsets_per_trigger=profile.count // 6, trigger_interval="0 seconds")
        wait_caught_up(run, timeout=drain_timeout(manifest.produced))
    IngestService(run).stop()  # as the stack stops it: the running micro-batch finishes
    batches = [json.loads(line) for line in history_path(run).read_text().splitlines()]
    warm_up, sustained = batches[0], batches[1:]
    return Drain(run, manifest, rows=sum(b["input_rows"] for b in sustained),
                 busy_seconds=sum(b["duration_ms"] for b in sustained) / 1000,
                 batches=len(sustained), first_batch=warm_up, wall_seconds=wall.seconds)


def visibility_delays(settings: Settings, after_version: int) -> list[float]:
    """Per record that a version after ``after_version`` added: that version's commit time -
    the record's Kafka timestamp."""
    path = settings.table_path(BRONZE_TABLE)
    table = DeltaTable(path)
    commit_time = {h["version"]: h["timestamp"] / 1000 for h in table.history()}
    delays: list[float] = []
    table.load_as_version(after_version)
    previous: set[str] = set(table.file_uris())
    for version in sorted(v for v in commit_time if v > after_version):
        table.load_as_version(version)
        files = set(table.file_uris())
        for added in files - previous:
            column = pq.read_table(added, columns=["kafka_timestamp"]).column(0)
            for stamp in column.to_pylist():
                created = (stamp.replace(tzinfo=UTC).timestamp() if isinstance(stamp, datetime)
                           else stamp)
                delays.append(commit_time[version] - created)
        previous = files
    return delays

