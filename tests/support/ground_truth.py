"""Views computed independently of Spark, with pandas: the ground truth tests compare with."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import pandas as pd

from lambdalake.generator.traffic import Manifest, Record, TrafficGenerator, TrafficProfile
from lambdalake.views.definition import ViewDefinition


def percentile_disc(values: Sequence[Any], percentile: float) -> Any:
    """The smallest value whose cumulative share of ``values`` reaches ``percentile`` (SQL's
    ``percentile_disc``); None for no values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percentile * len(ordered)) - 1)] if ordered else None


def rank_admits(values: Sequence[Any], answer: float, percentile: float, error: float) -> bool:
    """Whether ``answer`` is a ``percentile`` of ``values`` within the rank ``error``: the
    share of values below it and the share up to it bracket the percentile, each give or
    take ``error``."""
    numbers = [float(value) for value in values]
    below = sum(value < answer for value in numbers) / len(numbers)
    up_to = sum(value <= answer for value in numbers) / len(numbers)
    return below - error <= percentile <= up_to + error


MEASURES = {
    "count": len,
    "sum": lambda column: sum(column, Decimal(0)) if column.dtype == object else int(column.sum()),
    "max": lambda column: column.max(),
    "min": lambda column: column.min(),
    "distinct_count": lambda column: column.nunique(),
}
"""Each measure kind's exact value of a group's column (``approx_percentile``: its
``percentile_disc``, and the values, for checking a sketch's rank error)."""


def expected_view(events: pd.DataFrame, view: ViewDefinition, start: datetime, end: datetime
                  ) -> pd.DataFrame:
    """The view over distinct ``events`` (``occurred_at`` naive UTC): windows, group, measure;
    a percentile measure also has its group's values in ``<name>__values``."""
    events = events[events["event_type"].isin(view.event_types)].copy()
    events["window_start"] = events["occurred_at"].dt.floor(f"{view.grain_seconds}s")
    events = events[(events["window_start"] >= start.replace(tzinfo=None))
                    & (events["window_start"] < end.replace(tzinfo=None))]
    rows = []
    for key, group in events.groupby(["window_start", *view.dimensions]):
        row = dict(zip(["window_start", *view.dimensions], key, strict=True))
        for m in view.measures:
            values = group if not m.event_types else group[group["event_type"].isin(m.event_types)]
            column = values[m.column] if m.column else values["event_id"]
            if m.kind == "approx_percentile":
                present = [float(value) for value in column.dropna()]
                row[m.name] = percentile_disc(present, m.percentile)
                row[f"{m.name}__values"] = present
            else:
                row[m.name] = MEASURES[m.kind](column)
        rows.append(row)
    return pd.DataFrame(rows)


def bounds_as_of_processing(events: pd.DataFrame, view: ViewDefinition,
                            candidates: list[list[set[tuple[str, ...]]]], start: datetime,
                            end: datetime) -> pd.DataFrame:
    """What the speed layer may answer for a view with joins, whose attributes are those of
    processing time: for each window and dimensions, each measure's lowest (``<m>__low``:
    the events that can only count there) and highest value (``<m>__high``: every event that
    may count there), and ``certain`` (some event can only count there). ``candidates``: per
    join (``processing_time_candidates``), per event, the attribute values it may get.
    Counts, sums of non-negative columns and distinct counts are bounded so."""
    options = []  # per event, every combination of its joins' candidate values
    for number in range(len(events)):
        combos: list[tuple[str, ...]] = [()]
        for per_event in candidates:
            combos = [c + value for c in combos for value in sorted(per_event[number])]
        options.append(combos)
    exploded = events.assign(_combo=options, _certain=[len(c) == 1 for c in options]
                             ).explode("_combo", ignore_index=True)
    for position, column in enumerate(view.joined_columns):
        exploded[column] = exploded["_combo"].str[position]
    possible = expected_view(exploded, view, start, end)
    certain = expected_view(exploded[exploded["_certain"]], view, start, end)
    key = ["window_start", *view.dimensions]
    bounds = possible.merge(certain, on=key, how="left", suffixes=("__high", "__low"),
                            indicator=True)
    bounds["certain"] = bounds.pop("_merge") == "both"
    for m in view.measures:
        if m.kind not in ("count", "sum", "distinct_count"):
            raise NotImplementedError(f"{m.name}: no processing-time bounds for {m.kind}")
        if m.kind == "sum" and (exploded[m.column].dropna() < 0).any():
            raise NotImplementedError(f"{m.name}: a sum of negative values is not bounded")
        bounds[f"{m.name}__low"] = bounds[f"{m.name}__low"].fillna(0)
    return bounds


ANY_MEMBER = "*"


def totals_over_joins(events: pd.DataFrame, view: ViewDefinition, start: datetime,
                      end: datetime) -> pd.DataFrame:
    """The view with every joined attribute ``ANY_MEMBER``: per window and other dimension,
    what the joined attributes' rows add up to, whichever member each event joined."""
    return expected_view(events.assign(**dict.fromkeys(view.joined_columns, ANY_MEMBER)),
                         view, start, end)


def first_copies(bronze: pd.DataFrame) -> pd.DataFrame:
    """One row per ``event_id``: the copy that reached Kafka first, as the layers keep it."""
    return bronze.sort_values(["partition", "offset"]).drop_duplicates("event_id")


def manifest_records(manifest: Manifest) -> Iterator[Record]:
    """The records a generator run produced, regenerated from its manifest."""
    profile: dict[str, Any] = dict(manifest.profile)
    if profile.get("start_time"):
        profile["start_time"] = datetime.fromisoformat(str(profile["start_time"]))
    avro = (lambda event: b"") if profile.get("wire_format") == "avro" else None  # events only
    return TrafficGenerator(TrafficProfile(**profile), avro=avro).records()


def manifest_events(manifest: Manifest) -> pd.DataFrame:
    """Every distinct valid event a generator run produced, regenerated from its manifest,
    with its place in the run's records (``record_index``)."""
    events = pd.DataFrame([{**r.event, "record_index": index}
                           for index, r in enumerate(manifest_records(manifest))
                           if r.kind == "valid"])
    events["occurred_at"] = pd.to_datetime(events["occurred_at"], utc=True).dt.tz_localize(None)
    assert events["event_id"].is_unique and len(events) == len(manifest.valid_event_ids)
    return events
