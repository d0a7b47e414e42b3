"""Views computed independently of Spark, with pandas: the ground truth tests compare with."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pandas as pd

from lambdalake.generator import Manifest, TrafficGenerator, TrafficProfile
from lambdalake.views.definition import ViewDefinition

MEASURES = {
    "count": len,
    "sum": lambda column: sum(column, Decimal(0)) if column.dtype == object else int(column.sum()),
    "max": lambda column: column.max(),
    "min": lambda column: column.min(),
    "distinct_count": lambda column: column.nunique(),
}


def expected_view(events: pd.DataFrame, view: ViewDefinition, start: datetime, end: datetime
                  ) -> pd.DataFrame:
    """The view over distinct ``events`` (``occurred_at`` naive UTC): windows, group, measure."""
    events = events[events["event_type"].isin(view.event_types)].copy()
    events["window_start"] = events["occurred_at"].dt.floor(f"{view.grain_seconds}s")
    events = events[(events["window_start"] >= start.replace(tzinfo=None))
                    & (events["window_start"] < end.replace(tzinfo=None))]
    rows = []
    for key, group in events.groupby(["window_start", *view.dimensions]):
        row = dict(zip(["window_start", *view.dimensions], key))
        for m in view.measures:
            values = group if not m.event_types else group[group["event_type"].isin(m.event_types)]
            column = values[m.column] if m.column else values["event_id"]
            row[m.name] = MEASURES[m.kind](column)
        rows.append(row)
    return pd.DataFrame(rows)


def first_copies(bronze: pd.DataFrame) -> pd.DataFrame:
    """One row per ``event_id``: the copy that reached Kafka first, as the layers keep it."""
    return bronze.sort_values(["partition", "offset"]).drop_duplicates("event_id")


def manifest_events(manifest: Manifest) -> pd.DataFrame:
    """Every distinct valid event a generator run produced, regenerated from its manifest."""
    profile: dict[str, Any] = dict(manifest.profile)
    if profile.get("start_time"):
        profile["start_time"] = datetime.fromisoformat(str(profile["start_time"]))
    records = TrafficGenerator(TrafficProfile(**profile)).records()
    events = pd.DataFrame([r.event for r in records if r.kind == "valid"])
    events["occurred_at"] = pd.to_datetime(events["occurred_at"], utc=True).dt.tz_localize(None)
    assert events["event_id"].is_unique and len(events) == len(manifest.valid_event_ids)
    return events
