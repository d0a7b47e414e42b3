"""Crash helpers for streaming tests: SIGKILL an application while a micro-batch is in
flight, produce load in the background, and reconcile bronze with what was produced."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lambdalake.generator import Manifest, TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_TABLE
from lambdalake.settings import Settings
from lambdalake.stack.process import ManagedProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def batches(checkpoint: Path, log: str) -> set[int]:
    folder = checkpoint / log
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.exists() else set()


def committed(checkpoints: Sequence[Path]) -> dict[Path, int]:
    """The last committed batch of each query's checkpoint (-1: none yet)."""
    return {c: max(batches(c, "commits"), default=-1) for c in checkpoints}


def kill_mid_batch(
    process: ManagedProcess, checkpoints: Sequence[Path], committed_before: dict[Path, int],
    timeout: float = 180,
) -> dict[Path, int]:
    """Once some query has committed a batch newer than ``committed_before``, SIGKILL the
    application while that query's next batch is in flight (planned in its offset log, not
    yet in its commit log); return the last committed batch of every query."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for checkpoint in checkpoints:
            done = max(batches(checkpoint, "commits"), default=-1)
            planned = max(batches(checkpoint, "offsets"), default=-1)
            if done > committed_before.get(checkpoint, -1) and planned > done:
                process.kill()
                assert max(batches(checkpoint, "commits"), default=-1) < planned, "not mid-batch"
                return committed(checkpoints)
        time.sleep(0.05)
    raise AssertionError(f"no batch in flight after {committed_before} within {timeout}s")


def produce_in_background(settings: Settings, profile: TrafficProfile
                          ) -> tuple[threading.Thread, list[Manifest]]:
    """Start producing ``profile`` to the events topic; the list gets the manifest at the end."""
    manifests: list[Manifest] = []
    thread = threading.Thread(target=lambda: manifests.append(produce_traffic(
        TrafficGenerator(profile), EventProducer(settings.kafka, settings.kafka.events_topic.name)
    )))
    thread.start()
    return thread, manifests


def assert_each_record_once(spark: SparkSession, settings: Settings, records: int,
                            valid: int, malformed: int) -> None:
    """Bronze and quarantine together hold each of ``records`` Kafka records exactly once."""
    bronze = spark.read.format("delta").load(settings.table_path(BRONZE_TABLE))
    quarantine = spark.read.format("delta").load(settings.table_path(QUARANTINE_TABLE))
    coordinates = bronze.select("partition", "offset").union(quarantine.select("partition", "offset"))
    total, distinct = coordinates.count(), coordinates.distinct().count()
    assert distinct == total, f"{total - distinct} Kafka records were written twice"
    assert total == records, f"{records - total} Kafka records are missing"
    assert bronze.count() == valid
    assert quarantine.count() == malformed
