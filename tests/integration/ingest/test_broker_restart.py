"""Crash and restart the Kafka broker while traffic flows into ingest and the speed layer:
the producer retries idempotently, both consumers resume on their own, every record lands in
bronze exactly once and every valid page view counts once in the real-time view."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow.compute as pc
import pytest

from lambdalake.generator.traffic import TrafficProfile
from lambdalake.ingest.service import ingest_process, start_ingest_process, wait_caught_up
from lambdalake.ingest.status import QUERY_NAME
from lambdalake.settings import Settings
from lambdalake.speed.realtime import current_rows
from lambdalake.speed.shards import APP as SPEED_APP
from lambdalake.speed.stream import queries_of
from lambdalake.stack.kafka_broker import KafkaCluster
from lambdalake.streaming import service
from lambdalake.views.definition import load_views
from tests.support.ground_truth import manifest_events
from tests.support.streaming_chaos import assert_each_record_once, committed, produce_in_background

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENTS = 60_000
WARM_UP = 2_000
OUTAGE_SECONDS = 10


@pytest.fixture
def speed_layer(ingest_settings: Settings) -> Iterator[service.StreamingService]:
    """The speed application on the test's topic and lake, running; stopped afterwards."""
    speed = service.StreamingService(ingest_settings, SPEED_APP)
    speed.start()
    yield speed
    speed.stop()


@pytest.mark.chaos
def test_a_broker_crash_and_restart_during_load_loses_and_duplicates_nothing(
    ingest_settings: Settings, speed_layer: service.StreamingService, kafka: KafkaCluster,
    spark: SparkSession,
) -> None:
    settings, speed = ingest_settings, speed_layer
    start_ingest_process(settings)
    # both consumers past their first micro-batch (ingest's compiles its classification for
    # ~40 s on two cores), so they consume the load below while it is being produced
    warm_up = produce_in_background(settings, TrafficProfile(
        count=WARM_UP, max_lateness_minutes=3, seed=30)).manifest()
    wait_caught_up(settings, timeout=300)
    service.wait_caught_up(settings, SPEED_APP, timeout=300)
    checkpoints = [Path(settings.checkpoint_path(name))
                   for name in (QUERY_NAME, *queries_of(list(load_views().values())))]
    warmed = committed(checkpoints, "offsets")
    profile = TrafficProfile(count=EVENTS, rate=2_000, malformed_fraction=0.02,
                             duplicate_fraction=0.02, max_lateness_minutes=3, seed=31)
    production = produce_in_background(settings, profile)
    deadline = time.monotonic() + 180
    # the outage comes a third into production, once each query reads the load (has
    # planned a batch of it; ingest, niced, may take most of production for that batch)
    while (production.producer.counts.acknowledged < EVENTS // 3
           or any(n <= warmed[c] for c, n in committed(checkpoints, "offsets").items())):
        assert time.monotonic() < deadline, "a query planned no batch within 180 s"
        time.sleep(0.2)

    acknowledged = production.producer.counts.acknowledged
    for node in kafka.nodes:
        node.process.kill()  # a crash, not a clean shutdown: the log is recovered on start
    producing = production.sending.is_alive()
    assert kafka.live_brokers() == 0
    time.sleep(OUTAGE_SECONDS)
    kafka.start()
    # the outage fell within production, or the producer never had to retry across it
    assert producing and acknowledged < EVENTS, (
        f"production ended before the outage: {acknowledged} of {EVENTS} acknowledged")

    manifest = production.manifest()
    assert manifest.failed == 0 and manifest.acknowledged == manifest.produced == EVENTS
    print(f"brokers killed with {EVENTS - acknowledged} of {EVENTS} records unacknowledged")
    for process in (ingest_process(settings), speed.process):
        assert process.pid() is not None, (
            f"{process.name} did not survive the outage:\n{process.log_tail(40)}")
    wait_caught_up(settings, timeout=300)
    service.wait_caught_up(settings, SPEED_APP, timeout=600)

    assert_each_record_once(spark, settings, [warm_up, manifest])
    page_views = pc.sum(current_rows(settings, load_views()["page_traffic"])["views"]).as_py()
    events = pd.concat([manifest_events(warm_up), manifest_events(manifest)])
    assert page_views == (events["event_type"] == "page_view").sum()
