"""Ingest tests: each test gets its own topics, lake and checkpoints (isolated state)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lambdalake.ingest.service import ingest_process
from lambdalake.kafka.topics import ensure_platform_topics
from lambdalake.settings import Settings
from lambdalake.stack.kafka_broker import KafkaCluster


@pytest.fixture
def ingest_settings(
    kafka: KafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    """Settings (also exported to child processes) for an isolated ingest run."""
    overrides = {
        "LAMBDALAKE_KAFKA__EVENTS_TOPIC__NAME": f"test.events.{uuid.uuid4().hex[:8]}",
        "LAMBDALAKE_KAFKA__REFERENCE_TOPIC__NAME": f"test.reference.{uuid.uuid4().hex[:8]}",
        "LAMBDALAKE_LAKE__ROOT": str(tmp_path / "lake"),
        "LAMBDALAKE_LAKE__CHECKPOINT_ROOT": str(tmp_path / "checkpoints"),
        "LAMBDALAKE_STATE_DIR": str(tmp_path / "state"),
        "LAMBDALAKE_INGEST__TRIGGER_INTERVAL": "500 milliseconds",
        "LAMBDALAKE_INGEST__STATUS_INTERVAL_SECONDS": "0.5",
        "LAMBDALAKE_INGEST__MAX_OFFSETS_PER_TRIGGER": "50000",
    }
    for key, value in overrides.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    ensure_platform_topics(settings.kafka)
    yield settings
    ingest_process(settings).stop(timeout=30)
