"""Produce valid events, duplicates and every malformed kind; reconcile bronze and quarantine."""

from __future__ import annotations

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

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_every_record_lands_once_in_bronze_or_quarantine_with_a_reason(
    ingest_settings: Settings, spark: SparkSession
) -> None:
    settings = ingest_settings
    profile = TrafficProfile(count=20_000, malformed_fraction=0.05, duplicate_fraction=0.03,
                             late_fraction=0.1, seed=11)
    manifest = produce_traffic(
        TrafficGenerator(profile), EventProducer(settings.kafka, settings.kafka.events_topic.name)
    )
    assert manifest.acknowledged == manifest.produced == 20_000
    assert all(manifest.counts[kind] > 0 for kind in MALFORMED_KINDS)

    start_ingest_process(settings)
    wait_caught_up(settings, timeout=300)

    bronze = spark.read.format("delta").load(settings.table_path(BRONZE_TABLE))
    quarantine = spark.read.format("delta").load(settings.table_path(QUARANTINE_TABLE))
    valid, duplicates = manifest.counts["valid"], manifest.counts["duplicate"]
    assert bronze.count() == valid + duplicates
    assert quarantine.count() == manifest.malformed
    assert bronze.select("event_id").distinct().count() == valid
    assert {r.event_id for r in bronze.select("event_id").collect()} == set(manifest.valid_event_ids)

    reasons = {r.quarantine_reason: r["count"] for r in quarantine.groupBy("quarantine_reason").count().collect()}
    assert reasons == {kind: manifest.counts[kind] for kind in MALFORMED_KINDS}
    assert quarantine.where("quarantine_reason IS NULL").count() == 0

    coordinates = bronze.select("partition", "offset").union(quarantine.select("partition", "offset"))
    assert coordinates.distinct().count() == coordinates.count() == manifest.produced
