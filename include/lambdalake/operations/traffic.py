"""Traffic generators as the settings ask for them: JSON, or Avro through the registry."""

from __future__ import annotations

from dataclasses import replace

from lambdalake.generator import TrafficGenerator, TrafficProfile
from lambdalake.kafka.schema_registry import event_encoder
from lambdalake.settings import Settings


def traffic_generator(settings: Settings, profile: TrafficProfile) -> TrafficGenerator:
    """A generator of ``profile`` in ``kafka.events_format``; Avro is written with the schemas
    registered under the events topic (``lambdalake contracts register``, which `make up`
    runs)."""
    if settings.kafka.events_format == "json":
        return TrafficGenerator(replace(profile, wire_format="json"))
    return TrafficGenerator(replace(profile, wire_format="avro"), avro=event_encoder(settings))
