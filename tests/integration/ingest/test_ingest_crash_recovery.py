"""SIGKILL the ingest job repeatedly under load: no Kafka record is lost or written twice."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from lambdalake.generator import TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.ingest.service import ingest_process, start_ingest_process, wait_caught_up
from lambdalake.ingest.stream import QUERY_NAME
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_TABLE
from lambdalake.settings import Settings
from streaming_chaos import kill_mid_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENTS = 200_000
KILLS = 3


def test_sigkill_three_times_during_a_200k_run(ingest_settings: Settings, spark: SparkSession) -> None:
    settings = ingest_settings
    profile = TrafficProfile(count=EVENTS, rate=5_000, malformed_fraction=0.02,
                             duplicate_fraction=0.02, seed=23)
    manifests = []
    producer = threading.Thread(target=lambda: manifests.append(produce_traffic(
        TrafficGenerator(profile), EventProducer(settings.kafka, settings.kafka.events_topic.name)
    )))
    producer.start()
    checkpoints = [Path(settings.checkpoint_path(QUERY_NAME))]
    last_committed: dict[Path, int] = {}
    for _ in range(KILLS):
        start_ingest_process(settings)
        last_committed = kill_mid_batch(ingest_process(settings), checkpoints, last_committed)
        assert ingest_process(settings).pid() is None
    producer.join(timeout=300)
    (manifest,) = manifests
    assert manifest.acknowledged == manifest.produced == EVENTS

    start_ingest_process(settings)
    wait_caught_up(settings, timeout=300)

    bronze = spark.read.format("delta").load(settings.table_path(BRONZE_TABLE))
    quarantine = spark.read.format("delta").load(settings.table_path(QUARANTINE_TABLE))
    coordinates = bronze.select("partition", "offset").union(quarantine.select("partition", "offset"))
    total, distinct = coordinates.count(), coordinates.distinct().count()
    assert distinct == total, f"{total - distinct} Kafka records were written twice"
    assert total == EVENTS, f"{EVENTS - total} Kafka records are missing"
    assert bronze.count() == manifest.counts["valid"] + manifest.counts["duplicate"]
    assert quarantine.count() == manifest.malformed
