"""What a slice usually holds, learnt from the gate history: the row-count anomaly's bounds.

A slice's rows are compared with the recent past of the same layer and subject: the median
rows per hour of the last ``row_count_history`` intervals that were validated (each interval
once, its newest result; the slice's own interval excluded, so a re-run is not compared
with itself), scaled to the slice's length. The bounds are that figure divided and
multiplied by ``row_count_factor``. With fewer than ``row_count_min_history`` intervals
known there are no bounds: a new platform, or a new view, learns before it warns.

Rates per hour make intervals of any length comparable (an hourly run and a triggered run
over two days). A dead hour counts as a rate of zero, so a platform that is mostly idle
expects little, and a burst shows as an anomaly: a warning, never a block.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from lambdalake.settings import QualitySettings

RowBounds = tuple[int | None, int | None]
NO_BOUNDS: RowBounds = (None, None)


def usual_row_count(
    results: Iterable[dict[str, Any]], layer: str, subject: str, start: datetime,
    end: datetime, policy: QualitySettings,
) -> RowBounds:
    """The (lowest, highest) row count a slice [start, end) of ``subject`` is expected to have."""
    newest_per_interval: dict[tuple[str, str], dict[str, Any]] = {}
    for result in results:  # oldest first: a later result of an interval replaces it
        if (result.get("layer") == layer and result.get("subject") == subject
                and result.get("evaluated", 0) > 0):
            newest_per_interval[(result["start"], result["end"])] = result
    own = (start.isoformat(), end.isoformat())
    recent = [r for key, r in newest_per_interval.items() if key != own]
    recent.sort(key=lambda r: str(r.get("recorded_at", "")))
    rates = [rate for r in recent[-policy.row_count_history:] if (rate := _per_hour(r)) is not None]
    if len(rates) < policy.row_count_min_history:
        return NO_BOUNDS
    usual = statistics.median(rates) * (end - start).total_seconds() / 3600
    return (math.floor(usual / policy.row_count_factor),
            math.ceil(usual * policy.row_count_factor))


def _per_hour(result: dict[str, Any]) -> float | None:
    """Rows per hour of a recorded slice (None: the record has no usable interval)."""
    try:
        hours = (datetime.fromisoformat(result["end"])
                 - datetime.fromisoformat(result["start"])).total_seconds() / 3600
    except (KeyError, TypeError, ValueError):
        return None
    return int(result.get("rows", 0)) / hours if hours > 0 else None
