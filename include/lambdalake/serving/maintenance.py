"""Keeping the real-time store small and honest: reconcile, collapse, retire (no JVM).

Run by the serving DAG for every view in turn (``maintain_views``; after every batch publish
and on a short schedule):

1. **Reconcile.** For windows both layers hold — before the batch high-water mark, and
   closed in the speed layer (ended before its watermark) — compare every key's real-time
   value with the batch value, per measure. Rows that differ go to the
   ``serving_reconciliation`` table; the verdict is a quality-gate result (layer
   ``serving``) in the data-quality report. Exact measures must match; a distinct count
   may differ by ``serving.approx_tolerance_rsd`` times the view's relative standard
   deviation; the sketched kinds (percentiles, top-k) agree within their stated error
   (``MeasureKind.reconciles``). A real-time value *below* batch is only a warning when
   the speed layer reported dropping events as too late (the batch layer includes them);
   a value above batch, or a shortfall nothing explains, fails the gate. A view that joins
   reference data joins as of event time in batch and as of processing time in the speed layer: a
   difference in a member some key held or got after the window began (its attributes
   changed since) is **explained** (recorded with that severity, and a warning), as long
   as the view's counts and sums over all members of the window still agree (or fall short
   while late events were dropped): a join moves an event between members, it never loses
   one or counts it twice. The same gate carries two
   **freshness** warnings: the batch high-water mark is no further behind now than one
   batch interval, the view's lateness and ``quality.batch_freshness_slack_seconds``; and
   while records wait in Kafka, the speed layer's newest micro-batch for the view is no
   older than ``speed.freshness_sla_seconds``.
2. **Collapse.** If the gate passed: a closed window gets no more real-time writes, so its
   partial rows (one per micro-batch that touched a key) are rewritten to one combined
   partial row per key (``merge_partials``: sketches stay sketches), in one commit
   replacing those partitions.
3. **Retire.** If the gate passed, windows that ended ``serving.retire_margin_seconds``
   before the high-water mark are deleted: batch has answered them since, and readers that
   took their snapshot before the mark moved still find the rows they need.

Only closed windows are rewritten, so none of this conflicts with the speed layer's
appends (the tables are partitioned by ``window_start``); a lost commit race is retried.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lambdalake.lake.delta_rs import append_rows
from lambdalake.quality.verdict import ExpectationOutcome, GateResult
from lambdalake.serving.snapshot import (
    SnapshotStore,
    ViewSnapshot,
    quoted,
    sql_cursor,
)
from lambdalake.settings import Settings
from lambdalake.speed.realtime import RealtimeTable
from lambdalake.speed.shards import speed_status
from lambdalake.streaming.progress import progress_time
from lambdalake.views.definition import Join, ViewDefinition
from lambdalake.views.enrichment import members_changed_after

log = logging.getLogger(__name__)

RECONCILIATION_TABLE = "serving_reconciliation"
_SAMPLES = 5
FRESHNESS_CHECKS = 2
"""The freshness warnings every serving gate evaluates (``stale_layers``)."""
_SCHEMA = pa.schema([
    pa.field("view", pa.string(), nullable=False),
    pa.field("window_start", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("dimensions", pa.string(), nullable=False),
    pa.field("measure", pa.string(), nullable=False),
    pa.field("batch_value", pa.float64()),
    pa.field("realtime_value", pa.float64()),
    pa.field("absolute_drift", pa.float64(), nullable=False),  # NaN: not numbers
    pa.field("relative_drift", pa.float64()),
    pa.field("severity", pa.string(), nullable=False),
    pa.field("checked_at", pa.timestamp("us", tz="UTC"), nullable=False),
    # values that are not numbers (a first or last string, a list of values), as JSON
    pa.field("batch_text", pa.string()),
    pa.field("realtime_text", pa.string()),
])


@dataclass(frozen=True)
class SpeedState:
    """What reconciliation needs from the speed layer's status for one view."""

    watermark: datetime | None
    late_rows_dropped: int
    lag: int = 0                        # records of the view's input waiting in Kafka
    newest_batch: datetime | None = None  # when the view's newest micro-batch ran


@dataclass(frozen=True)
class MaintenanceReport:
    view: str
    gate: GateResult
    windows_compared: int
    windows_collapsed: int
    rows_retired: int

    def summary(self) -> str:
        return (f"{self.view}: {self.gate.summary()}; {self.windows_compared} windows compared, "
                f"{self.windows_collapsed} collapsed, {self.rows_retired} real-time rows retired")


def speed_state(settings: Settings, view: ViewDefinition) -> SpeedState:
    entry = (speed_status(settings).get("views") or {}).get(view.name) or {}
    watermark, newest = entry.get("watermark"), entry.get("batch_timestamp")
    return SpeedState(
        datetime.fromtimestamp(progress_time(watermark), UTC) if watermark else None,
        int(entry.get("dropped_by_watermark_total") or 0),
        int(entry.get("lag") or 0),
        datetime.fromtimestamp(progress_time(newest), UTC) if newest else None,
    )


def stale_layers(settings: Settings, view: ViewDefinition, high_water_mark: datetime,
                 speed: SpeedState, now: datetime) -> list[ExpectationOutcome]:
    """Freshness warnings: a layer further behind than the platform promises."""
    stale = []
    allowed = (settings.batch.interval_seconds + view.lateness_seconds
               + settings.quality.batch_freshness_slack_seconds)
    behind = (now - high_water_mark).total_seconds()
    if behind > allowed:
        stale.append(ExpectationOutcome(
            "freshness:batch", "batch_high_water_mark_is_recent", "high_water_mark", "warning",
            f"the batch high-water mark is at most {allowed} s behind now (one interval + the "
            f"view's lateness + quality.batch_freshness_slack_seconds); observed in seconds",
            observed=round(behind)))
    sla = settings.speed.freshness_sla_seconds
    if speed.lag and speed.newest_batch is not None:
        age = (now - speed.newest_batch).total_seconds()
        if age > sla:
            stale.append(ExpectationOutcome(
                "freshness:realtime", "realtime_newest_batch_is_recent", "batch_timestamp",
                "warning", f"while records wait ({speed.lag}), the speed layer's newest "
                f"micro-batch is at most speed.freshness_sla_seconds ({sla}s) old",
                observed=round(age)))
    return stale


def drift_rows(snapshot: ViewSnapshot, closed_before: datetime) -> list[dict[str, Any]]:
    """Per key and measure, batch (``b_``) vs real-time (``r_``; ``p_``: the partial of a
    serialized measure), for windows both layers hold and closed."""
    view = snapshot.view
    if snapshot.batch_rows is None or snapshot.realtime_rows is None:
        return []
    key = ", ".join(quoted(c) for c in view.key)
    measures = ", ".join(f"b.{quoted(m.name)} AS {quoted('b_' + m.name)}, "
                         f"r.{quoted(m.name)} AS {quoted('r_' + m.name)}" for m in view.measures)
    serialized = [m.name for m in view.measures if m.measure_kind.merged_by_kind]
    partials = "".join(f", p.{quoted(name)} AS {quoted('p_' + name)}" for name in serialized)
    join_partials = f" LEFT JOIN realtime_partials p USING ({key})" if serialized else ""
    dimensions = ", ".join(f"{quoted(d)} := coalesce(b.{quoted(d)}, r.{quoted(d)})"
                           for d in view.dimensions)
    with sql_cursor() as connection:
        connection.register("batch_rows", snapshot.batch_rows)
        connection.register("realtime_rows", snapshot.realtime_rows)
        if serialized:
            connection.register("realtime_partials", snapshot.realtime_partials)
        cursor = connection.execute(
            f"WITH r AS (SELECT * FROM realtime_rows WHERE window_start < $mark "
            f"AND window_end <= $closed), "
            f"b AS (SELECT * FROM batch_rows WHERE window_start IN (SELECT window_start FROM r)) "
            f"SELECT coalesce(b.window_start, r.window_start) AS window_start, "
            f"to_json(struct_pack({dimensions}))::VARCHAR AS dimensions, {measures}{partials} "
            f"FROM b FULL OUTER JOIN r USING ({key}){join_partials}",
            {"mark": snapshot.high_water_mark, "closed": closed_before},
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


ChangedMembers = Callable[[Join, datetime], dict[tuple[str, ...], set[str]]]
"""Per member of a join, the keys changing after a moment that held it from it on
(``views.enrichment.members_changed_after``)."""


def judge(
    view: ViewDefinition, rows: list[dict[str, Any]], late_rows_dropped: int, tolerance_rsd: float,
    checked_at: datetime, changed_members: ChangedMembers | None = None,
) -> list[dict[str, Any]]:
    """The differing (key, measure) pairs, each with its severity (see the module docstring);
    each measure's kind decides what agrees (``MeasureKind.reconciles``). An explained pair
    also names the changed keys that explain it (``explained_by``: per joined entity, not
    written to the reconciliation table), so a report can say how far the explanation
    reaches."""
    members: dict[tuple[int, datetime], dict[tuple[str, ...], set[str]]] = {}

    def changed(join: Join, moment: datetime) -> dict[tuple[str, ...], set[str]]:
        key = (view.joins.index(join), moment)
        if key not in members:
            assert changed_members is not None
            members[key] = changed_members(join, moment)
        return members[key]

    unbalanced = _unbalanced_totals(view, rows, late_rows_dropped) if view.joins else set()
    drifts = []
    for row in rows:
        for measure in view.measures:
            kind = measure.measure_kind
            batch = _comparable(row[f"b_{measure.name}"])
            realtime = _comparable(row[f"r_{measure.name}"])
            if kind.reconciles(view, measure, batch, realtime, row.get(f"p_{measure.name}"),
                               tolerance_rsd):
                continue
            numbers = all(v is None or isinstance(v, float) for v in (batch, realtime))
            absolute = (realtime or 0.0) - (batch or 0.0) if numbers else math.nan
            relative = absolute / batch if numbers and batch else None
            severity = "critical"
            balanced = (row["window_start"], _others(view, row), measure.name) not in unbalanced
            explained_by = {
                join.entity: sorted(keys) for join in view.joins
                if (keys := changed(join, row["window_start"]).get(_members(join, row)))
            } if changed_members is not None and balanced else {}
            if explained_by:
                severity = "explained"
            elif late_rows_dropped > 0 and kind.short_of_batch(absolute):
                severity = "warning"
            drifts.append({
                "view": view.name, "window_start": row["window_start"],
                "dimensions": row["dimensions"], "measure": measure.name,
                "batch_value": batch if numbers else None,
                "realtime_value": realtime if numbers else None,
                "absolute_drift": absolute, "relative_drift": relative,
                "severity": severity, "checked_at": checked_at,
                "batch_text": None if numbers else _json_text(batch),
                "realtime_text": None if numbers else _json_text(realtime),
                **({"explained_by": explained_by} if explained_by else {}),
            })
    return drifts


def _members(join: Join, row: dict[str, Any]) -> tuple[str, ...]:
    dimensions = json.loads(row["dimensions"])
    return tuple(str(dimensions[a]) for a in join.attributes)


def _others(view: ViewDefinition, row: dict[str, Any]) -> str:
    """A row's dimensions other than the joined attributes."""
    joined = set(view.joined_columns)
    return json.dumps({k: v for k, v in json.loads(row["dimensions"]).items()
                       if k not in joined}, sort_keys=True)


def _unbalanced_totals(view: ViewDefinition, rows: list[dict[str, Any]],
                       late_rows_dropped: int) -> set[tuple[datetime, str, str]]:
    """(window, other dimensions, measure) whose additive measure's total over the joined
    members differs between the layers more than moves explain: an event counted twice, or
    lost while the speed layer dropped no late events."""
    totals: dict[tuple[datetime, str, str], list[float]] = {}
    for row in rows:
        for measure in view.measures:
            if measure.measure_kind.additive:
                total = totals.setdefault((row["window_start"], _others(view, row),
                                           measure.name), [0.0, 0.0])
                total[0] += _number(row[f"b_{measure.name}"]) or 0.0
                total[1] += _number(row[f"r_{measure.name}"]) or 0.0
    return {key for key, (batch, realtime) in totals.items()
            if not math.isclose(batch, realtime, rel_tol=1e-9, abs_tol=1e-6)
            and (realtime > batch or not late_rows_dropped)}


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _comparable(value: Any) -> Any:
    """A measure's value as reconciliation compares it: a number as a float, anything
    else (a string, an instant, a list of values) as it is."""
    return float(value) if isinstance(value, int | float | Decimal) else value


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


def _keys_text(explained_by: dict[str, list[str]], shown: int = 5) -> str:
    """``product: p1, p7`` (at most ``shown`` keys per entity, then how many more): the keys
    that explain one sample row."""
    return "; ".join(
        f"{entity}: {', '.join(keys[:shown])}"
        + (f" and {len(keys) - shown} more" if len(keys) > shown else "")
        for entity, keys in sorted(explained_by.items()))


def gate_result(
    view: ViewDefinition, compared: list[dict[str, Any]], drifts: list[dict[str, Any]],
    late_rows_dropped: int, start: datetime, end: datetime, began: float,
    stale: list[ExpectationOutcome],
) -> GateResult:
    """The reconciliation verdict, with the freshness warnings ``stale``."""
    outcomes: dict[str, list[ExpectationOutcome]] = {
        "critical": [], "warning": [], "explained": []}
    for severity in outcomes:
        for measure in view.measures:
            mine = [d for d in drifts if d["measure"] == measure.name and d["severity"] == severity]
            if not mine:
                continue
            rule = measure.measure_kind.reconciliation_rule(view)
            if severity == "warning":
                rule += f" (shortfall explained by {late_rows_dropped} late events dropped)"
            if severity == "explained":
                rule += (" (explained: members whose keys' reference data changed since the "
                         "window began; batch joins as of event time, the speed layer as of "
                         "processing time)")
            samples = [{"window_start": str(d["window_start"]), "dimensions": d["dimensions"],
                        **{f"{layer}_value": str(d[f"{layer}_value"] if d[f"{layer}_text"] is None
                                                 else d[f"{layer}_text"])
                           for layer in ("batch", "realtime")},
                        **({"changed_keys": _keys_text(d["explained_by"])}
                           if "explained_by" in d else {})} for d in mine[:_SAMPLES]]
            reach: dict[str, set[str]] = {}
            for d in mine:
                for entity, keys in d.get("explained_by", {}).items():
                    reach.setdefault(entity, set()).update(keys)
            outcomes[severity].append(ExpectationOutcome(
                f"drift:{measure.name}" + (":explained" if severity == "explained" else ""),
                "reconcile_realtime_with_batch", measure.name,
                "critical" if severity == "critical" else "warning",
                rule, unexpected_count=len(mine), samples=samples,
                explained_by={entity: len(keys) for entity, keys in reach.items()}))
    return GateResult("serving", view.name, start, end, success=not outcomes["critical"],
                      critical_failures=outcomes["critical"],
                      warnings=[*outcomes["warning"], *outcomes["explained"], *stale],
                      evaluated=len(view.measures) + FRESHNESS_CHECKS, rows=len(compared),
                      seconds=time.monotonic() - began)


def maintain(settings: Settings, view: ViewDefinition, run_id: str | None = None,
             now: datetime | None = None) -> MaintenanceReport:
    """Reconcile, record (with the DAG run's id), collapse and retire one view's real-time
    rows (``now``: the clock freshness is judged by)."""
    from lambdalake.quality.docs import record_with_pages

    began = time.monotonic()
    now = now or datetime.now(UTC)
    store = SnapshotStore(settings, {view.name: view})
    snapshot = store.get(view.name)
    speed = speed_state(settings, view)
    closed_before = speed.watermark or datetime.min.replace(tzinfo=UTC)
    compared = drift_rows(snapshot, closed_before)
    drifts = judge(view, compared, speed.late_rows_dropped,
                   settings.serving.approx_tolerance_rsd, now,
                   lambda join, moment: members_changed_after(settings, join, moment))
    if drifts:
        append_rows(settings.table_path(RECONCILIATION_TABLE), _SCHEMA, drifts)
    windows = sorted({row["window_start"] for row in compared})
    start = windows[0] if windows else snapshot.high_water_mark
    end = windows[-1] + timedelta(seconds=view.grain_seconds) if windows else start
    gate = gate_result(view, compared, drifts, speed.late_rows_dropped, start, end, began,
                       stale_layers(settings, view, snapshot.high_water_mark, speed, now))
    record_with_pages([gate], settings, run_id=run_id, windows_compared=len(windows))
    if not gate.success:  # keep the evidence: nothing is rewritten until the layers agree
        return MaintenanceReport(view.name, gate, len(windows), 0, 0)
    table = RealtimeTable(settings, view)
    collapsed = table.collapse(closed_before) if speed.watermark else 0
    margin = timedelta(seconds=settings.serving.retire_margin_seconds)
    retired = table.retire(snapshot.high_water_mark - margin)
    return MaintenanceReport(view.name, gate, len(windows), collapsed, retired)


def maintain_views(settings: Settings, views: Iterable[ViewDefinition],
                   run_id: str | None = None) -> list[MaintenanceReport]:
    """``maintain`` every view in turn, in one process: the serving DAG runs after every
    publish, and a task per view cost each publish a task process per view (Airflow's
    start and bookkeeping each). A view's error does not keep the others from being
    maintained; the errors are raised together after them (an ``ExceptionGroup``). A failed
    gate is in its report."""
    reports: list[MaintenanceReport] = []
    errors: dict[str, Exception] = {}
    for view in views:
        try:
            report = maintain(settings, view, run_id)
        except Exception as error:  # raised below, after the other views
            log.exception("maintaining view %s failed", view.name)
            error.add_note(f"while maintaining view {view.name}")
            errors[view.name] = error
            continue
        log.info("%s", report.summary())
        reports.append(report)
    if errors:
        raise ExceptionGroup(f"maintenance failed for view(s) {', '.join(errors)}",
                             list(errors.values()))
    return reports
