"""How fresh each layer is for one view: the API's ``/freshness`` and ``lambdalake status``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lambdalake.batch.late_arrivals import Waiting
from lambdalake.serving.query import json_value
from lambdalake.serving.snapshot import ViewSnapshot

SPEED_FIELDS = ("batch_timestamp", "watermark", "complete_from", "lag",
                "dropped_by_watermark_total")


def speed_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """The speed layer's state for one view: with shards, the slowest shard's (the status
    merges them so), and each shard's under ``shards``."""
    fields = {key: entry.get(key) for key in SPEED_FIELDS}
    if "shards" in entry:
        fields["shards"] = {app: {key: shard.get(key) for key in SPEED_FIELDS}
                            for app, shard in entry["shards"].items()}
    return fields


def view_freshness(snapshot: ViewSnapshot, speed_status: dict[str, Any], now: datetime,
                   waiting: Waiting | None = None) -> dict[str, Any]:
    """Where batch ends (the mark, and what was published beyond a gap after it), how old
    the newest real-time row is, the speed query's state, and the late rows that wait for
    their published window to be recomputed (``waiting``)."""
    newest = snapshot.realtime_newest
    return {
        "high_water_mark": json_value(snapshot.high_water_mark),
        "batch_behind_seconds": round((now - snapshot.high_water_mark).total_seconds(), 3),
        "batch_beyond_mark": [[json_value(start), json_value(end)]
                              for start, end in snapshot.batch_beyond_mark],
        "batch_view_version": snapshot.view_version,
        "realtime_delta_version": snapshot.realtime_delta_version,
        "realtime_newest_update": json_value(newest),
        "realtime_age_seconds": None if newest is None
        else round((now - newest).total_seconds(), 3),
        "snapshot_age_seconds": round((now - snapshot.taken_at).total_seconds(), 3),
        "speed": speed_fields(speed_status),
        "late_rows_waiting": None if waiting is None else waiting.rows,
        "late_events_waiting": None if waiting is None else waiting.events,
        "oldest_waiting_window": None if waiting is None else json_value(waiting.oldest),
        "late_rows_waiting_since": None if waiting is None
        else json_value(waiting.waiting_since),
    }
