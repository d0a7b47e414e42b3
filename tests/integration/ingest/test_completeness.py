"""The batch layer's wait condition against a real broker: which records arrived before a
moment (Kafka's time index), and whether the ingest stream has committed them."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

from lambdalake.ingest.completeness import offsets_before, store_completeness
from lambdalake.ingest.status import status_path
from lambdalake.kafka.producer import EventProducer
from lambdalake.settings import Settings


def send(settings: Settings, count: int) -> None:
    producer = EventProducer(settings.kafka, settings.kafka.events_topic.name)
    for i in range(count):
        producer.send(f"key-{i}", b"{}")
    assert producer.flush() == 0 and producer.counts.acknowledged == count


def report_ingested(settings: Settings, end_offsets: dict[str, int]) -> None:
    """What the ingest stream's status says it committed to bronze."""
    path = status_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"end_offsets": end_offsets}))


def test_bronze_is_complete_once_ingest_committed_what_arrived_before_the_moment(
    ingest_settings: Settings,
) -> None:
    settings = ingest_settings
    send(settings, 30)
    time.sleep(1.0)
    moment = datetime.now(UTC)
    time.sleep(1.0)
    send(settings, 20)  # arrived after the moment: not needed
    before = offsets_before(settings, moment)
    assert sum(before.values()) == 30 and len(before) == settings.kafka.events_topic.partitions

    report_ingested(settings, {})
    waiting = store_completeness(settings, moment)
    assert not waiting.complete and sum(waiting.missing.values()) == 30
    assert "the forever store lacks 30 records" in waiting.describe()

    report_ingested(settings, {p: max(0, o - 1) for p, o in before.items()})
    assert not store_completeness(settings, moment).complete  # one short per partition

    report_ingested(settings, before)
    done = store_completeness(settings, moment)
    assert done.complete and done.missing == {}

    future = store_completeness(settings, datetime.now(UTC) + timedelta(hours=1))
    assert not future.complete and "waiting for the clock" in future.describe()
