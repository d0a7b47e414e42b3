"""One restatement cycle (DAG ``lambdalake_restatement``): find the published intervals that
late rows reached, trigger a batch run for each, warn about rows waiting too long.

The batch runs go through Airflow's REST API, so each is an ordinary, visible run of
``lambdalake_batch_views`` (run id ``restate__<interval start>__<time>``; its data interval
the restated one, its note naming the cycle's run and the late rows, and the cycle's run
note linking each run it triggered) with the same sensor,
gates and publication as a scheduled one. The API also tells which intervals batch
runs are computing now: a restatement never starts beside a run of an overlapping interval,
no more than ``batch.restate_max_intervals`` restatement runs are active at once, and an
interval whose restatement failed (a gate stopped it) waits
``batch.restate_retry_after_minutes`` before it is tried again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from lambdalake.batch.late_arrivals import LateArrivals, Waiting
from lambdalake.batch.publication import read_publications
from lambdalake.batch.restatement import (
    NOTE_LIMIT,
    RESTATEMENT_DAG_ID,
    RUN_ID_PREFIX,
    Interval,
    Restatement,
    plan_restatements,
)
from lambdalake.orchestration.airflow_api import AirflowClient
from lambdalake.quality.history import record
from lambdalake.quality.verdict import WARNING, ExpectationOutcome, GateResult
from lambdalake.settings import Settings
from lambdalake.timeutil import duration_seconds, iso_utc, parse_utc
from lambdalake.views.definition import ViewDefinition, load_views

BATCH_DAG_ID = "lambdalake_batch_views"
RESTATEMENT_LAYER = "restatement"


@dataclass(frozen=True)
class RestatementCycle:
    """What one cycle saw and did."""

    waiting: list[Waiting]
    triggered: list[tuple[str, Restatement]]   # (run id, restatement)
    still_running: list[str]                   # restatement runs of earlier cycles
    overdue: list[Waiting]                     # views with rows waiting longer than allowed
    held_back: list[str] = field(default_factory=list)  # failed lately: not retried yet

    def describe(self) -> list[str]:
        lines = [f"{w.view}: {w.rows} late rows ({w.events} events) in {len(w.windows)} "
                 f"published windows from {w.oldest} on" for w in self.waiting if w.rows]
        lines += [f"restatement run {run_id} still running" for run_id in self.still_running]
        lines += [f"restatement run {run_id} failed lately: its interval waits before a retry"
                  for run_id in self.held_back]
        lines += [f"triggered {run_id}: {r.describe()}" for run_id, r in self.triggered]
        lines += [f"WARNING {w.view}: late rows have waited since {w.waiting_since}"
                  for w in self.overdue]
        return lines or ["no late rows wait: nothing to restate"]

    def note(self) -> str | None:
        """The cycle's run note: a link to each batch run it triggered, and what that run
        restates (each of those links back to the cycle in its own note); None: none."""
        if not self.triggered:
            return None
        runs = "; ".join(
            f"[{BATCH_DAG_ID} run {run_id}](/dags/{BATCH_DAG_ID}/runs/{quote(run_id, safe='')})"
            f" restates [{iso_utc(r.start)}, {iso_utc(r.end)}) for {', '.join(sorted(r.views))}"
            for run_id, r in self.triggered)
        return f"Triggered {runs}."[:NOTE_LIMIT]


def warn_after_seconds(settings: Settings, views: list[ViewDefinition]) -> int:
    """How long late rows may wait before a warning: the setting, or one batch interval +
    the longest lateness + two restatement cycles."""
    batch = settings.batch
    if batch.restate_warn_after is not None:
        return duration_seconds(batch.restate_warn_after)
    return (batch.interval_seconds + max(view.lateness_seconds for view in views)
            + 2 * 60 * batch.restate_every_minutes)


def run_interval(run: dict[str, Any]) -> Interval | None:
    """The event-time interval an active batch run recomputes: its data interval (None: a
    full reprocess, which builds new versions and carries newer slices over when it
    switches). A run triggered with the form's defaults computes the last whole interval
    within it, so its data interval covers what it computes."""
    if (run.get("conf") or {}).get("full_reprocess"):
        return None
    start, end = run.get("data_interval_start"), run.get("data_interval_end")
    return (parse_utc(start), parse_utc(end)) if start and end else None


def restatement_cycle(settings: Settings, client: AirflowClient, now: datetime,
                      cycle_run_id: str) -> RestatementCycle:
    """Look for late rows, trigger the restatements there is room for, record warnings."""
    views = list(load_views().values())
    waiting = LateArrivals(settings, views).waiting()
    active = client.active_runs(BATCH_DAG_ID)
    still_running = [str(run["dag_run_id"]) for run in active
                     if str(run["dag_run_id"]).startswith(RUN_ID_PREFIX)]
    busy = [interval for run in active if (interval := run_interval(run)) is not None]
    retry_after = timedelta(minutes=settings.batch.restate_retry_after_minutes)
    failed = failed_lately(client.dag_runs(BATCH_DAG_ID, ended_after=now - retry_after), now,
                           retry_after)
    busy += [interval for run in failed if (interval := run_interval(run)) is not None]
    room = max(0, settings.batch.restate_max_intervals - len(still_running))
    planned = plan_restatements(waiting, read_publications(settings), busy, room)
    triggered = [(client.trigger(BATCH_DAG_ID, restatement.conf(), restatement.run_id(now),
                                 (restatement.start, restatement.end),
                                 restatement.note(cycle_run_id)),
                  restatement) for restatement in planned]
    allowed = timedelta(seconds=warn_after_seconds(settings, views))
    overdue = [w for w in waiting if w.waiting_since and now - w.waiting_since > allowed]
    grains = {view.name: view.grain_seconds for view in views}
    for late in overdue:
        record(waiting_too_long(late, grains[late.view], now, allowed), settings,
               run_id=cycle_run_id, dag_id=RESTATEMENT_DAG_ID)
    return RestatementCycle(waiting, triggered, still_running, overdue,
                            [str(run["dag_run_id"]) for run in failed])


def failed_lately(runs: list[dict[str, Any]], now: datetime, within: timedelta
                  ) -> list[dict[str, Any]]:
    """The restatement runs among ``runs`` that failed less than ``within`` ago."""
    return [run for run in runs
            if str(run["dag_run_id"]).startswith(RUN_ID_PREFIX) and run["state"] == "failed"
            and run.get("end_date") and now - parse_utc(run["end_date"]) < within]


def waiting_too_long(view: Waiting, grain_seconds: int, now: datetime,
                     allowed: timedelta) -> GateResult:
    """A warning (not a failure: the answer is short, not wrong) for the quality history,
    over the windows from the oldest to the newest waiting."""
    assert view.oldest is not None and view.waiting_since is not None
    observed = {"rows": view.rows, "events": view.events, "windows": len(view.windows),
                "waiting_since": iso_utc(view.waiting_since),
                "waited_seconds": round((now - view.waiting_since).total_seconds())}
    rule = (f"late rows are restated within {allowed} (batch.restate_warn_after); "
            "check DAG lambdalake_restatement and the restate__ runs of lambdalake_batch_views")
    outcome = ExpectationOutcome("late_rows_restated_in_time", "(restatement)", None, WARNING,
                                 rule, observed=observed)
    end = view.windows[-1].window_start + timedelta(seconds=grain_seconds)
    return GateResult(RESTATEMENT_LAYER, view.view, view.oldest, end, success=True,
                      critical_failures=[], warnings=[outcome], evaluated=1, rows=view.rows)
