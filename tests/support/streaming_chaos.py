"""Crash helpers for streaming tests: SIGKILL an application while a micro-batch is in
flight, produce load in the background, poison records, and reconcile bronze with what was
produced."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lambdalake.contracts.registry import encode_event
from lambdalake.generator.catalogue import event_time
from lambdalake.generator.traffic import Manifest, TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_TABLE
from lambdalake.settings import Settings
from lambdalake.stack.process import ManagedProcess
from tests.support.background import Background

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def batches(checkpoint: Path, log: str) -> set[int]:
    folder = checkpoint / log
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()


def committed(checkpoints: Sequence[Path], log: str = "commits") -> dict[Path, int]:
    """The last committed batch of each query's checkpoint (-1: none yet); the last planned
    one with ``log="offsets"``."""
    return {c: max(batches(c, log), default=-1) for c in checkpoints}


def kill_mid_batch(
    process: ManagedProcess, checkpoints: Sequence[Path], committed_before: dict[Path, int],
    timeout: float = 180,
) -> dict[Path, int]:
    """Once some query has committed a batch newer than ``committed_before``, SIGKILL the
    application while that query's next batch is in flight (planned in its offset log, not
    yet in its commit log); return the last committed batch of every query. The application
    is frozen (SIGSTOP) while the aim is checked again, so a batch that committed between
    the first check and the kill is seen, and the aim taken again, never a spurious miss."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for checkpoint in checkpoints:
            done = max(batches(checkpoint, "commits"), default=-1)
            planned = max(batches(checkpoint, "offsets"), default=-1)
            if done > committed_before.get(checkpoint, -1) and planned > done:
                pid = process.pid()
                assert pid is not None, f"{process.name} exited:\n{process.log_tail(40)}"
                group = os.getpgid(pid)
                os.killpg(group, signal.SIGSTOP)
                if max(batches(checkpoint, "commits"), default=-1) < planned:
                    process.kill()
                    return committed(checkpoints)
                os.killpg(group, signal.SIGCONT)  # batch ``planned`` committed meanwhile
        time.sleep(0.05)
    raise AssertionError(f"no batch in flight after {committed_before} within {timeout}s")


@dataclass(frozen=True)
class Production:
    """Traffic being produced in the background: the producer's delivery counts so far, and
    the manifest once every record is sent."""

    producer: EventProducer
    sending: Background[Manifest]

    def manifest(self, timeout: float = 300) -> Manifest:
        """The run's manifest (what producing raised, raised here)."""
        return self.sending.result(timeout)


def produce_in_background(settings: Settings, profile: TrafficProfile,
                          avro: Callable[[Mapping[str, Any]], bytes] | None = None
                          ) -> Production:
    """Start producing ``profile`` to the events topic (Avro encoded with ``avro``)."""
    producer = EventProducer(settings.kafka, settings.kafka.events_topic.name)
    return Production(producer, Background(
        lambda: produce_traffic(TrafficGenerator(profile, avro=avro), producer), "producer"))


def assert_each_record_once(spark: SparkSession, settings: Settings,
                            manifests: Sequence[Manifest]) -> None:
    """Bronze and quarantine together hold each Kafka record the ``manifests`` produced
    exactly once, and bronze's events are exactly the valid events produced."""
    bronze = spark.read.format("delta").load(settings.table_path(BRONZE_TABLE))
    quarantine = spark.read.format("delta").load(settings.table_path(QUARANTINE_TABLE))
    coordinates = bronze.select("partition", "offset").union(quarantine.select("partition", "offset"))
    total, distinct = coordinates.count(), coordinates.distinct().count()
    records = sum(m.produced for m in manifests)
    assert distinct == total, f"{total - distinct} Kafka records were written twice"
    assert total == records, f"{records - total} Kafka records are missing"
    assert bronze.count() == sum(m.counts["valid"] + m.counts["duplicate"] for m in manifests)
    assert quarantine.count() == sum(m.malformed for m in manifests)
    ids = {row.event_id for row in bronze.select("event_id").distinct().collect()}
    produced = {event_id for m in manifests for event_id in m.valid_event_ids}
    assert ids == produced, (f"bronze lacks {len(produced - ids)} valid events and holds "
                             f"{len(ids - produced)} that were not produced")


@dataclass(frozen=True)
class Poison:
    """One record built to break a reader, and what ingest must make of it: its
    ``quarantine_reason``, or None for a valid event at the very size limit."""

    event_id: str
    value: bytes
    reason: str | None


def poison_events(count: int, max_record_bytes: int, occurred_at: datetime) -> list[Poison]:
    """``count`` page views at the edges a parser breaks on, in turn: nested deeper than any
    parser's stack within the size limit (``invalid_json``) and far beyond it
    (``oversized``), bytes that are not UTF-8 (``invalid_utf8``), exactly the size limit
    (valid) and one byte over it (``oversized``)."""

    def page_view(event_id: str, padding: bytes) -> bytes:
        event = {"event_id": event_id, "event_type": "page_view", "user_id": "u-poison",
                 "session_id": "s-poison", "occurred_at": event_time(occurred_at),
                 "schema_version": 1, "country": "DE", "device": "mobile", "page": "/poison"}
        return encode_event(event)[:-1] + b', "padding": ' + padding + b"}"

    def sized(event_id: str, size: int) -> bytes:
        unpadded = len(page_view(event_id, b'""'))
        return page_view(event_id, b'"' + b"x" * (size - unpadded) + b'"')

    levels = (max_record_bytes - 400) // 2
    kinds: list[tuple[Callable[[str], bytes], str | None]] = [
        (lambda event_id: page_view(event_id, b"[" * levels + b"]" * levels), "invalid_json"),
        (lambda event_id: page_view(event_id, b"[" * 100_000 + b"]" * 100_000), "oversized"),
        (lambda event_id: page_view(event_id, b'"caf\xe9"'), "invalid_utf8"),
        (lambda event_id: sized(event_id, max_record_bytes), None),
        (lambda event_id: sized(event_id, max_record_bytes + 1), "oversized"),
    ]
    poison = []
    for number in range(count):
        build, reason = kinds[number % len(kinds)]
        event_id = f"poison-{number:05d}"
        poison.append(Poison(event_id, build(event_id), reason))
    return poison
