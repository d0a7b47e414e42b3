"""Traffic generators as the settings ask for them: JSON, or Avro through the registry; and
the producers of the reference entities' topics that go with them."""

from __future__ import annotations

from dataclasses import replace

from lambdalake.contracts.registry import EntityRegistry
from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile
from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.schema_registry import event_encoder
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings


def traffic_generator(settings: Settings, profile: TrafficProfile) -> TrafficGenerator:
    """A generator of ``profile`` in ``kafka.events_format``; Avro is written with the schemas
    registered under the events topic (``lambdalake contracts register``, which `make up`
    runs)."""
    if settings.kafka.events_format == "json":
        return TrafficGenerator(replace(profile, wire_format="json"))
    return TrafficGenerator(replace(profile, wire_format="avro"), avro=event_encoder(settings))


def reference_producers(settings: Settings) -> dict[str, EventProducer]:
    """A producer for each reference entity's compacted topic (created if missing)."""
    producers = {}
    for entity in EntityRegistry().entities:
        topic = settings.kafka.entity_topic(entity)
        ensure_topic(settings.kafka, topic)
        producers[entity] = EventProducer(settings.kafka, topic.name)
    return producers
