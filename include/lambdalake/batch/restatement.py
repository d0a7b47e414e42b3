"""Restatement: published intervals recomputed because late rows reached bronze after them.

``LateArrivals`` finds the windows whose published slice misses rows; ``plan_restatements``
turns them into batch runs: one per published interval (the batch run's own unit, so a
restatement is exactly a re-run of that interval) with every view waiting in it, oldest
interval first, at most ``limit``, none overlapping an interval a batch run is computing now.
The batch DAG runs each like any other interval (the same gates, write-audit-publish, a
publication that leaves the high-water mark where it is) and records it in the
``batch_restatements`` log: interval, view, the late rows and events it took in, the bronze
versions before and after, and the run id.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pyarrow as pa

from lambdalake.batch.late_arrivals import Waiting
from lambdalake.lake.delta_rs import append_rows, content_key, read_rows
from lambdalake.settings import Settings
from lambdalake.timeutil import iso_utc

RESTATEMENTS_TABLE = "batch_restatements"
RUN_ID_PREFIX = "restate__"
RESTATEMENT_DAG_ID = "lambdalake_restatement"
NOTE_LIMIT = 1000
"""Airflow keeps at most this many characters of a run's note."""
_TIME = pa.timestamp("us", tz="UTC")
_SCHEMA = pa.schema([
    pa.field("view", pa.string(), nullable=False),
    pa.field("interval_start", _TIME, nullable=False),
    pa.field("interval_end", _TIME, nullable=False),
    pa.field("late_rows", pa.int64(), nullable=False),
    pa.field("late_events", pa.int64(), nullable=False),
    pa.field("computed_from", pa.int64(), nullable=False),  # the slice's old bronze version
    pa.field("bronze_version", pa.int64(), nullable=False),  # the version it was restated from
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("restated_at", _TIME, nullable=False),
])

Interval = tuple[datetime, datetime]


@dataclass(frozen=True)
class LateRows:
    """What one view waits for in one interval: rows, distinct events, the oldest lineage."""

    rows: int
    events: int
    computed_from: int


@dataclass(frozen=True)
class Restatement:
    """One batch run to trigger: a published interval and the views waiting in it."""

    start: datetime
    end: datetime
    views: dict[str, LateRows]

    def conf(self) -> dict[str, Any]:
        """The run's conf: its views, and their late rows as ``restating`` (not a form
        param: the batch DAG's ``plan`` reads it from the conf). Its interval is the run's
        data interval."""
        return {"views": sorted(self.views),
                "restating": {name: vars(late) for name, late in sorted(self.views.items())}}

    def note(self, cause_run_id: str) -> str:
        """The run page's note: which restatement run triggered it, for which late rows."""
        path = f"/dags/{RESTATEMENT_DAG_ID}/runs/{quote(cause_run_id, safe='')}"
        late = "; ".join(f"`{name}` {late.rows} rows ({late.events} events; slice computed "
                         f"from bronze v{late.computed_from})"
                         for name, late in sorted(self.views.items()))
        return (f"Triggered by [{RESTATEMENT_DAG_ID} run {cause_run_id}]({path}): restates "
                f"[{iso_utc(self.start)}, {iso_utc(self.end)}) for the late rows that reached "
                f"bronze after it was published: {late}.")[:NOTE_LIMIT]

    def run_id(self, now: datetime) -> str:
        return f"{RUN_ID_PREFIX}{iso_utc(self.start)}__{now.astimezone(UTC):%Y%m%dT%H%M%S}"

    def describe(self) -> str:
        late = ", ".join(f"{name} {late.rows} rows" for name, late in sorted(self.views.items()))
        return f"[{iso_utc(self.start)}, {iso_utc(self.end)}): {late}"


def plan_restatements(
    waiting: list[Waiting], publications: list[dict[str, Any]], busy: list[Interval],
    limit: int,
) -> list[Restatement]:
    """At most ``limit`` restatements, oldest interval first, none overlapping ``busy`` (the
    intervals batch runs are computing now) or each other.

    A waiting window is restated with the interval its newest publication covered; the
    interval takes in the late rows that are the window's own (``WaitingWindow.own``), so
    a row in several hopping windows counts once.
    """
    late: dict[Interval, dict[str, LateRows]] = defaultdict(dict)
    for view in waiting:
        covering = sorted((row for row in publications if row["view"] == view.view),
                          key=lambda row: row["published_at"], reverse=True)
        for window in view.windows:
            interval = next(((row["interval_start"], row["interval_end"]) for row in covering
                             if row["interval_start"] <= window.window_start
                             < row["interval_end"]), None)
            if interval is None:  # published since the look: its run read the late rows
                continue
            known = late[interval].get(view.view, LateRows(0, 0, window.computed_from))
            late[interval][view.view] = LateRows(
                known.rows + window.own_rows, known.events + window.own_events,
                min(known.computed_from, window.computed_from))
    planned: list[Restatement] = []
    taken = list(busy)
    for (start, end), views in sorted(late.items()):
        if len(planned) == limit:
            break
        if any(start < busy_end and busy_start < end for busy_start, busy_end in taken):
            continue
        planned.append(Restatement(start, end, views))
        taken.append((start, end))
    return planned


def record_restatement(settings: Settings, start: datetime, end: datetime,
                       restating: dict[str, dict[str, int]], bronze_versions: dict[str, int],
                       run_id: str) -> None:
    """Log that ``run_id`` restated these views' slices of [start, end) (one commit; a
    retried ``publish`` logs nothing twice)."""
    rows = [{"view": view, "interval_start": start, "interval_end": end,
             "late_rows": late["rows"], "late_events": late["events"],
             "computed_from": late["computed_from"], "bronze_version": bronze_versions[view],
             "run_id": run_id}
            for view, late in sorted(restating.items()) if view in bronze_versions]
    now = datetime.now(UTC)
    append_rows(settings.table_path(RESTATEMENTS_TABLE), _SCHEMA,
                [{**row, "restated_at": now} for row in rows],
                once=content_key("restatement", rows))


def read_restatements(settings: Settings) -> list[dict[str, Any]]:
    """Every restatement recorded, oldest first (none before the first)."""
    return sorted(read_rows(settings.table_path(RESTATEMENTS_TABLE), _SCHEMA),
                  key=lambda row: row["restated_at"])
