"""Produce valid events, duplicates, every malformed kind and a poison flood; reconcile
bronze and quarantine record by record."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from lambdalake.generator.traffic import (
    MALFORMED_KINDS,
    TrafficGenerator,
    TrafficProfile,
    produce_traffic,
)
from lambdalake.ingest.service import start_ingest_process, wait_caught_up
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_TABLE
from lambdalake.settings import Settings
from tests.support.figures import Figures
from tests.support.streaming_chaos import poison_events

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_every_record_lands_once_in_bronze_or_quarantine_with_a_reason(
    ingest_settings: Settings, spark: SparkSession, figures: Figures
) -> None:
    """20,000 generated records (5 % malformed) and 1,500 poison records among them (the
    parser's edges: nesting, size, encoding), so more than 10 % of the traffic is bad."""
    settings = ingest_settings
    profile = TrafficProfile(count=20_000, malformed_fraction=0.05, duplicate_fraction=0.03,
                             late_fraction=0.1, seed=11)
    producer = EventProducer(settings.kafka, settings.kafka.events_topic.name)
    manifest = produce_traffic(TrafficGenerator(profile), producer)
    poison = poison_events(1_500, settings.ingest.max_record_bytes,
                           datetime.now(UTC) - timedelta(minutes=5))
    for record in poison:
        producer.send(b"u-poison", record.value)
    assert producer.flush() == 0
    assert manifest.acknowledged == manifest.produced == 20_000
    assert producer.counts.acknowledged == 20_000 + len(poison)
    assert all(manifest.counts[kind] > 0 for kind in MALFORMED_KINDS)
    bad = manifest.malformed + sum(1 for record in poison if record.reason)
    assert bad / producer.counts.acknowledged > 0.10

    start_ingest_process(settings)
    wait_caught_up(settings, timeout=300)

    bronze = spark.read.format("delta").load(settings.table_path(BRONZE_TABLE))
    quarantine = spark.read.format("delta").load(settings.table_path(QUARANTINE_TABLE))
    valid, duplicates = manifest.counts["valid"], manifest.counts["duplicate"]
    at_the_limit = {record.event_id for record in poison if record.reason is None}
    assert bronze.count() == valid + duplicates + len(at_the_limit)
    assert quarantine.count() == bad
    assert bronze.select("event_id").distinct().count() == valid + len(at_the_limit)
    assert {r.event_id for r in bronze.select("event_id").collect()} == {
        *manifest.valid_event_ids, *at_the_limit}

    reasons = {r.quarantine_reason: r["count"] for r in quarantine.groupBy("quarantine_reason").count().collect()}
    assert reasons == Counter({kind: manifest.counts[kind] for kind in MALFORMED_KINDS}) + \
        Counter(record.reason for record in poison if record.reason)
    assert quarantine.where("quarantine_reason IS NULL").count() == 0

    coordinates = bronze.select("partition", "offset").union(quarantine.select("partition", "offset"))
    assert coordinates.distinct().count() == coordinates.count() == producer.counts.acknowledged
    figures(records=producer.counts.acknowledged, bad=bad, poison=len(poison),
            in_bronze=bronze.count(), in_quarantine=quarantine.count(), lost=0, duplicated=0)
