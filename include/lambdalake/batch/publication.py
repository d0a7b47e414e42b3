"""The batch layer's publications and the high-water mark the serving layer merges at.

When an interval's view slices passed their quality gate, the batch DAG *publishes* them:
one row per (view, interval) in the ``batch_publications`` log. A view's high-water mark
is the end of the unbroken run of published intervals that starts at the schedule's first
day: every interval before it is final in the batch view. An interval that failed its gate
(or was never run) leaves a gap, so the mark stops there instead of skipping it; publishing
only adds rows, so the mark never moves back, and re-publishing an interval (a backfill) is
harmless. Intervals published beyond a gap are final too: serving reads batch rows before
the mark and in each of them (``HighWaterMarks.beyond``), real-time rows everywhere else.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lambdalake.lake.delta_rs import append_rows, content_key, read_rows
from lambdalake.settings import Settings

PUBLICATIONS_TABLE = "batch_publications"
_SCHEMA = pa.schema([
    pa.field("view", pa.string(), nullable=False),
    pa.field("interval_start", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("interval_end", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("view_version", pa.int64(), nullable=False),
    pa.field("bronze_version", pa.int64(), nullable=False),
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("published_at", pa.timestamp("us", tz="UTC"), nullable=False),
])


@dataclass(frozen=True)
class Publication:
    view: str
    interval_start: datetime
    interval_end: datetime
    view_version: int
    bronze_version: int
    run_id: str


def publish(settings: Settings, publications: list[Publication]) -> None:
    """Record that these view slices are final (one commit for all of them). Publishing the
    same slices again (a retried ``publish`` task) records nothing twice."""
    now = datetime.now(UTC)
    append_rows(settings.table_path(PUBLICATIONS_TABLE), _SCHEMA,
                [{**p.__dict__, "published_at": now} for p in publications],
                once=content_key("publish", [p.__dict__ for p in publications]))


def published_intervals(settings: Settings, view_name: str) -> list[tuple[datetime, datetime]]:
    """The distinct intervals published for ``view_name``, oldest first."""
    return sorted({(r["interval_start"], r["interval_end"])
                   for r in read_publications(settings) if r["view"] == view_name})


def read_publications(settings: Settings, where: pc.Expression | None = None
                      ) -> list[dict[str, Any]]:
    """The rows of the publication log (those ``where`` selects; none before the first
    publish)."""
    return read_rows(settings.table_path(PUBLICATIONS_TABLE), _SCHEMA, where)


def high_water_marks(settings: Settings) -> HighWaterMarks:
    """Every view's mark, from one read of the publication log."""
    marks = HighWaterMarks(settings.batch.first_day)
    marks.add(read_publications(settings))
    return marks


def advanced(mark: datetime, intervals: list[tuple[datetime, datetime]]) -> datetime:
    """``mark`` moved to the end of the unbroken run of ``intervals`` (oldest first) from it.
    Intervals that end before it (a backfill of older history) do not move it back."""
    for start, end in intervals:
        if start > mark:  # a gap: nothing after it counts yet
            break
        mark = max(mark, end)
    return mark


class HighWaterMarks:
    """Every view's mark: ``advanced`` from the first day's start over its published
    intervals, whether or not anything before that day exists. Kept up to date as
    publications are added, without holding them all: an interval that ends at or before its
    view's mark can never move it again, so only those beyond a gap are kept. What a reader
    that follows the publication log holds: the log gains a row per view and run (43,800 a
    year of hourly runs of five views), and re-reading it at every publish would cost more
    with every run."""

    def __init__(self, first_day: date) -> None:
        self.first = datetime.combine(first_day, time(), tzinfo=UTC)
        self._marks: dict[str, datetime] = {}
        self._beyond: dict[str, list[tuple[datetime, datetime]]] = {}  # per view, past a gap

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        """Take in publication rows (``view``, ``interval_start``, ``interval_end``)."""
        added: dict[str, set[tuple[datetime, datetime]]] = defaultdict(set)
        for row in rows:
            added[row["view"]].add((row["interval_start"], row["interval_end"]))
        for view, intervals in added.items():
            waiting = sorted({*self._beyond.get(view, ()), *intervals})
            mark = self._marks[view] = advanced(self.of(view), waiting)
            self._beyond[view] = [interval for interval in waiting if interval[1] > mark]

    def of(self, view: str) -> datetime:
        """The view's mark: the first day's start until its first interval is published."""
        return self._marks.get(view, self.first)

    def beyond(self, view: str) -> tuple[tuple[datetime, datetime], ...]:
        """The view's published time past its mark, oldest first, adjoining intervals joined:
        batch answers there too, though a gap lies between it and the mark."""
        runs: list[tuple[datetime, datetime]] = []
        for start, end in self._beyond.get(view, ()):
            if runs and start <= runs[-1][1]:
                runs[-1] = (runs[-1][0], max(runs[-1][1], end))
            else:
                runs.append((start, end))
        return tuple(runs)
