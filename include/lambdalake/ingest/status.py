"""Where the ingest stream reports its progress, apart from the stream itself: what reads
it (the batch DAG's completeness sensor, ``make status``, benchmarks) must not import the
stream's classification and schema registry client (0.15 s of CPU at every poke of
the sensor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lambdalake.settings import Settings
from lambdalake.streaming import progress

QUERY_NAME = "ingest"


def status_path(settings: Settings) -> Path:
    return progress.status_path(settings, QUERY_NAME)


def read_status(settings: Settings) -> dict[str, Any] | None:
    return progress.read_status(settings, QUERY_NAME)


def history_path(settings: Settings) -> Path:
    return progress.history_path(settings, QUERY_NAME)
