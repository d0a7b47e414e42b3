"""A producer whose clock runs an hour ahead, on a running speed layer: its events are
counted in their (future) windows, and the watermark moves no further than the wall clock
plus ``ingest.max_future_skew_seconds``, so the on-time events other producers send after
it are counted, none dropped as late."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from lambdalake.contracts.registry import encode_event
from lambdalake.generator.catalogue import event_time
from lambdalake.kafka.topics import ensure_topic
from lambdalake.settings import Settings
from lambdalake.speed.realtime import current_rows
from lambdalake.speed.service import SpeedLayer, wait_speed_caught_up
from lambdalake.speed.shards import speed_status
from lambdalake.timeutil import parse_utc
from lambdalake.views.definition import load_views
from tests.support.figures import Figures

AHEAD = timedelta(hours=1)
FAST, ON_TIME = 50, 500


@pytest.fixture
def speed_settings(kafka: Any, tmp_path: Path) -> Iterator[Settings]:
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {
            "LAMBDALAKE_KAFKA__EVENTS_TOPIC__NAME": f"test.clock.{uuid.uuid4().hex[:8]}",
            "LAMBDALAKE_LAKE__ROOT": str(tmp_path / "lake"),
            "LAMBDALAKE_LAKE__CHECKPOINT_ROOT": str(tmp_path / "checkpoints"),
            "LAMBDALAKE_STATE_DIR": str(tmp_path / "state"),
            "LAMBDALAKE_SPEED__STATUS_INTERVAL_SECONDS": "0.5",
        }.items():
            patch.setenv(key, value)
        settings = Settings()
        ensure_topic(settings.kafka, settings.kafka.events_topic)
        try:
            yield settings
        finally:
            SpeedLayer(settings).stop()


def page_views(page: str, count: int, at: datetime) -> list[dict[str, Any]]:
    return [{"event_id": str(uuid.uuid4()), "event_type": "page_view", "user_id": f"u{n % 7}",
             "session_id": f"s{n % 11}", "occurred_at": event_time(at - timedelta(seconds=n % 30)),
             "schema_version": 1, "country": "DE", "device": "mobile", "page": page}
            for n in range(count)]


def send(settings: Settings, events: list[dict[str, Any]], kafka_time: datetime) -> None:
    """As a producer with that clock does: the Kafka timestamp is its own time too."""
    producer = Producer({**settings.kafka.client_config(), "enable.idempotence": True})
    for event in events:
        producer.produce(settings.kafka.events_topic.name, encode_event(event),
                         event["user_id"].encode(),
                         timestamp=int(kafka_time.timestamp() * 1000))
    assert producer.flush(60) == 0


def views_of(settings: Settings, page: str) -> int:
    rows = current_rows(settings, load_views()["page_traffic"])
    return 0 if rows is None else sum(
        row["views"] for row in rows.to_pylist() if row["page"] == page)


def test_a_producer_an_hour_ahead_makes_no_on_time_event_late(
    speed_settings: Settings, figures: Figures,
) -> None:
    settings = speed_settings
    SpeedLayer(settings).start()
    fast_clock = datetime.now(UTC) + AHEAD
    send(settings, page_views("/ahead", FAST, fast_clock), fast_clock)
    wait_speed_caught_up(settings, timeout=300)
    bound = datetime.now(UTC) + timedelta(seconds=settings.ingest.max_future_skew_seconds)
    lateness = timedelta(seconds=load_views()["page_traffic"].lateness_seconds)
    status = speed_status(settings)["views"]["page_traffic"]
    watermark = parse_utc(status["watermark"])
    assert watermark <= bound - lateness, (watermark, bound, lateness)

    now = datetime.now(UTC)
    send(settings, page_views("/on-time", ON_TIME, now), now)
    wait_speed_caught_up(settings, timeout=300)
    status = speed_status(settings)["views"]["page_traffic"]
    assert status["dropped_by_watermark_total"] == 0, status
    assert views_of(settings, "/on-time") == ON_TIME
    assert views_of(settings, "/ahead") == FAST
    figures(fast_events=FAST, on_time_events=ON_TIME, counted=ON_TIME + FAST, dropped_late=0,
            watermark_ahead_of_the_wall_clock_seconds=round((watermark - now).total_seconds()))
