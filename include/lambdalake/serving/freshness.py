"""How fresh each layer is for one view: the API's ``/freshness`` and ``lambdalake status``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lambdalake.serving.query import json_value
from lambdalake.serving.snapshot import ViewSnapshot

SPEED_FIELDS = ("batch_timestamp", "watermark", "lag", "dropped_by_watermark_total")


def view_freshness(snapshot: ViewSnapshot, speed_status: dict[str, Any], now: datetime
                   ) -> dict[str, Any]:
    """Where batch ends, how old the newest real-time row is, and the speed query's state."""
    newest = snapshot.realtime_newest
    return {
        "high_water_mark": json_value(snapshot.high_water_mark),
        "batch_behind_seconds": round((now - snapshot.high_water_mark).total_seconds(), 3),
        "batch_view_version": snapshot.view_version,
        "realtime_delta_version": snapshot.realtime_delta_version,
        "realtime_newest_update": json_value(newest),
        "realtime_age_seconds": None if newest is None
        else round((now - newest).total_seconds(), 3),
        "snapshot_age_seconds": round((now - snapshot.taken_at).total_seconds(), 3),
        "speed": {key: speed_status.get(key) for key in SPEED_FIELDS},
    }
