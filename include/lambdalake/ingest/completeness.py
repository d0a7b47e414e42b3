"""Is the forever store complete up to an arrival time? The batch layer's wait condition.

An interval [start, end) of event time may be computed once every record that reached
Kafka before ``end + lateness`` is in bronze, and every reference change that reached the
entities' topics before then is in the reference changelog (whose history the enriched
views join). Kafka's time index answers which offsets those are (``offsets_for_times``:
per partition, the first offset at or after the moment); the ingest application's status
says which offsets each of its two queries committed. Records that arrive later still land
and are picked up when the interval is recomputed (a backfill, or a restatement).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from lambdalake.ingest.status import read_status
from lambdalake.settings import Settings

_OFFSET_END = -1  # offsets_for_times: no record at or after the moment (yet)


@dataclass(frozen=True)
class Completeness:
    """How far bronze is from holding every record that arrived before ``moment``."""

    moment: datetime
    required: dict[str, int]  # per "topic:partition": offsets bronze must have reached
    ingested: dict[str, int]  # per "topic:partition": offsets bronze holds

    @property
    def missing(self) -> dict[str, int]:
        return {p: end - self.ingested.get(p, 0) for p, end in self.required.items()
                if self.ingested.get(p, 0) < end}

    @property
    def complete(self) -> bool:
        return self.moment <= datetime.now(UTC) and not self.missing

    def describe(self) -> str:
        if self.moment > datetime.now(UTC):
            return f"waiting for the clock to pass {self.moment.isoformat()}"
        if self.missing:
            return (f"the forever store lacks {sum(self.missing.values())} records that "
                    f"arrived before {self.moment.isoformat()} ({self.missing})")
        return (f"the forever store holds every record that arrived before "
                f"{self.moment.isoformat()}")


def entity_topics(settings: Settings) -> list[str]:
    """The reference entities' compacted topics."""
    from lambdalake.contracts.registry import EntityRegistry

    return [settings.kafka.entity_topic(entity).name for entity in EntityRegistry().entities]


def reference_offsets(status: dict[str, Any]) -> dict[str, int]:
    """The entities' offsets the reference changelog holds, from ingest's status document."""
    return dict((status.get("reference") or {}).get("end_offsets") or {})


def offsets_before(settings: Settings, moment: datetime, topic: str | None = None
                   ) -> dict[str, int]:
    """Per partition of ``topic`` (default: the events topic): the offset of the first record
    at or after ``moment`` (every offset below it arrived before), or the end of the log."""
    topic = topic or settings.kafka.events_topic.name
    consumer = Consumer({**settings.kafka.client_config(), "group.id": "lambdalake-completeness",
                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        millis = int(moment.timestamp() * 1000)
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, millis) for p in partitions], timeout=10)
        offsets = {}
        for tp in found:
            if tp.error is not None:
                raise RuntimeError(f"Kafka cannot look up {topic}:{tp.partition}: {tp.error}")
            offset = tp.offset
            if offset == _OFFSET_END:
                _, offset = consumer.get_watermark_offsets(
                    TopicPartition(topic, tp.partition), timeout=10)
            offsets[f"{topic}:{tp.partition}"] = offset
        return offsets
    finally:
        consumer.close()


def store_completeness(settings: Settings, moment: datetime) -> Completeness:
    """Compare what Kafka received before ``moment`` (events and reference changes) with what
    the ingest application committed."""
    status = read_status(settings) or {}
    required = offsets_before(settings, moment)
    for topic in entity_topics(settings):
        required |= offsets_before(settings, moment, topic)
    return Completeness(moment, required,
                        {**status.get("end_offsets", {}), **reference_offsets(status)})
