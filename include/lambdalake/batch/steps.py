"""What one run of the batch DAG does, step by step, as plain functions (the DAG is wiring).

A run covers an event-time interval: its data interval (for a run triggered with the
form's default logical date, the last whole interval before it). It waits until bronze is
complete for the interval, gates bronze, recomputes into staging tables (or, for a full
reprocess, builds new versions), gates what it wrote, and publishes: the staged slices are
copied into the tables readers use and the publication log advances the high-water mark,
or switched versions become visible. Nothing a run writes is visible before its gate
passed (``lambdalake.batch.staging``). Each Spark step runs as a child process
(``run_spark_job``) whose ``result`` lines come back here.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from lambdalake.orchestration.spark_jobs import DATA_REJECTED_EXIT, SparkJobFailed, run_spark_job
from lambdalake.settings import Settings
from lambdalake.timeutil import iso_utc, parse_utc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchPlan:
    """The run's interval, views and mode, checked before anything starts.

    A full reprocess covers all of history, so it has no interval.
    """

    start: datetime | None
    end: datetime | None
    views: list[str]
    full_reprocess: bool
    run_id: str
    restating: dict[str, dict[str, int]] | None = None
    """Set when the restatement DAG triggered the run: per view, the late rows it takes in."""

    def to_xcom(self) -> dict[str, Any]:
        return {**asdict(self), "start": _iso(self.start), "end": _iso(self.end)}

    @classmethod
    def from_xcom(cls, data: dict[str, Any]) -> BatchPlan:
        return cls(**{**data, "start": _parse_utc(data["start"]), "end": _parse_utc(data["end"])})

    @property
    def interval_args(self) -> list[str]:
        if self.start is None or self.end is None:
            raise ValueError("a full reprocess has no interval")
        return ["--start", iso_utc(self.start), "--end", iso_utc(self.end)]


def plan_batch_run(
    params: dict[str, Any], data_interval_start: datetime | None,
    data_interval_end: datetime | None, run_id: str, conf: dict[str, Any] | None = None,
) -> BatchPlan:
    """The run's plan from its trigger-form params, its conf and its data interval.

    The run computes its data interval, which must be aligned to the views' slide: a
    scheduled run's, a backfill's, one set in the form or through the REST API, or the one
    the DAG's timetable infers for a run triggered by hand (the last whole interval before
    the form's default logical date, "now": ``lambdalake.orchestration.schedule``). Raises
    ``ValueError`` with a message for the UI when the params or the conf do not make sense.
    """
    from lambdalake.batch.recompute import check_interval
    from lambdalake.views.definition import load_views

    conf = conf or {}
    legacy = sorted({"start", "end"} & set(conf))
    if legacy:
        raise ValueError(f"conf {legacy}: the run computes its data interval; trigger it with "
                         "one (the form's Data Interval, or data_interval_start/end through "
                         "the REST API: lambdalake recompute)")
    views = load_views()
    names = list(params.get("views") or sorted(views))
    unknown = sorted(set(names) - set(views))
    if unknown:
        raise ValueError(f"unknown views {unknown}; known: {sorted(views)}")
    if params.get("full_reprocess"):
        return BatchPlan(None, None, names, True, run_id)
    if data_interval_start is None or data_interval_end is None:
        raise ValueError("this run has no data interval: trigger it with a logical date or a "
                         "data interval")
    start, end = data_interval_start, data_interval_end
    for name in names:
        check_interval(views[name], start, end)
    return BatchPlan(start, end, names, False, run_id, _restating(conf, names))


def _restating(conf: dict[str, Any], names: list[str]) -> dict[str, dict[str, int]] | None:
    """The restatement DAG's account of the late rows this run takes in (in the run's conf,
    not a form param), checked."""
    restating = conf.get("restating")
    if not restating:
        return None
    fields = {"rows", "events", "computed_from"}
    for name, late in restating.items():
        if name not in names or not isinstance(late, dict) or set(late) != fields \
                or not all(isinstance(v, int) and v >= 0 for v in late.values()):
            raise ValueError(f"restating: {name!r} must be one of this run's views with "
                             f"non-negative integers {sorted(fields)}, not {late!r}")
    return {name: dict(late) for name, late in restating.items()}


def events_end(plan: BatchPlan) -> datetime:
    """Until when the run's slices read events: the interval's end, or later where a view's
    hopping windows that start in the interval end after it (``recompute.reach_end``)."""
    from lambdalake.batch.recompute import reach_end
    from lambdalake.views.definition import load_views

    if plan.end is None:
        raise ValueError("a full reprocess has no interval")
    views = load_views()
    return max(reach_end(views[name], plan.end) for name in plan.views)


def completeness_moment(plan: BatchPlan) -> datetime:
    """Bronze must hold what arrived before the events the run reads end (``events_end``)
    plus the longest lateness."""
    from lambdalake.views.definition import load_views

    views = load_views()
    return events_end(plan) + timedelta(
        seconds=max(views[n].lateness_seconds for n in plan.views))


def gate_bronze(plan: BatchPlan) -> int | None:
    """Validate the bronze rows the run reads (the interval's, to ``events_end``) as of bronze's
    version when the gate step starts, and return that version (the step pins and prints it): the
    run computes it and no other, so rows that reach bronze after the gate are not computed ungated
    (they are late rows of the slice, restated in a later run). A full reprocess reads slices gated
    before: None. (The task process itself never opens a Delta table: delta-rs's runtime does not
    survive the fork that starts the step.)"""
    from lambdalake.batch.written import parse_gated_bronze

    if plan.full_reprocess:
        log.info("full reprocess: every bronze interval was gated when it was first computed")
        return None
    assert plan.start is not None
    events = ["--start", iso_utc(plan.start), "--end", iso_utc(events_end(plan))]
    return parse_gated_bronze(
        run_gate(["--layer", "bronze", *events, "--run-id", plan.run_id]))


def compute(plan: BatchPlan, bronze_version: int | None) -> list[dict[str, Any]]:
    """Stage the interval's slices, recomputed from the bronze version ``gate_bronze``
    gated, or build new versions for a full reprocess."""
    from lambdalake.batch.written import parse_results

    if not plan.full_reprocess and bronze_version is None:
        raise ValueError("no bronze version from gate_bronze (its XCom is gone): clear "
                         "gate_bronze with compute, so the run computes what it gated")
    action = (["build"] if plan.full_reprocess else
              ["stage", *plan.interval_args, "--bronze-version", str(bronze_version)])

    lines = run_spark_job(
        "batch_views", [*action, "--views", ",".join(plan.views), "--run-id", plan.run_id])
    return [written.to_xcom() for written in parse_results(lines)]


def gate_views(settings: Settings, plan: BatchPlan, written: list[dict[str, Any]]) -> None:
    """Validate what ``compute`` wrote: the interval's staged slices (against bronze's
    version they were computed from), or each built version whole."""
    from lambdalake.batch.written import SliceWritten
    from lambdalake.views.catalog import physical_table

    slices = [SliceWritten.from_xcom(w) for w in written]
    if not plan.full_reprocess:
        bronze_versions = {w.bronze_version for w in slices}
        pinned = ["--bronze-version", str(*bronze_versions)] if len(bronze_versions) == 1 else []
        run_gate(["--layer", "batch", "--views", ",".join(plan.views), *plan.interval_args,
                  "--staged", *pinned, "--run-id", plan.run_id])
        return
    for built in slices:
        path = settings.table_path(physical_table(built.view, built.view_version))
        run_gate([
            "--layer", "batch", "--views", built.view, "--table-path", path,
            "--start", iso_utc(built.start), "--end", iso_utc(built.end),
            "--run-id", plan.run_id])


def run_gate(args: list[str], job: str = "validate") -> list[str]:
    """Run the gate step ``spark_jobs/validate.py`` (or another step that gates what it
    writes). Data that failed its critical checks fails the task at once
    (``AirflowFailException``): a retry would read the same data, so only a gate that could
    not validate (a lost server, a crash) gets the task's retries."""
    try:
        return run_spark_job(job, args)
    except SparkJobFailed as failed:
        if failed.exit_code != DATA_REJECTED_EXIT:
            raise
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(
            "the data failed its critical checks (above; `lambdalake quality --failed` lists "
            "them): fix the data, then clear the task or trigger the interval again") from failed


@dataclass(frozen=True)
class Published:
    """What ``publish`` made visible of one view: the extra of the view's asset event, so a
    DAG waiting for the view knows which rows changed and how."""

    view: str
    start: datetime | None
    """The interval published; None (with ``end``) for a full reprocess: all of the view."""
    end: datetime | None
    high_water_mark: datetime
    view_version: int
    """The view's physical version readers use (``view_<view>_v<n>``)."""
    delta_version: int
    """That table's Delta version once published: read it ``versionAsOf`` for this state."""
    rows: int
    restatement: bool
    """The restatement DAG triggered the run for late rows of this view: the interval was
    published before and its rows replace those."""
    full_reprocess: bool
    previous_high_water_mark: datetime | None = None
    """The view's mark before this publish: the event says how far it moved."""

    def asset_extra(self) -> dict[str, Any]:
        return {**asdict(self), "start": _iso(self.start), "end": _iso(self.end),
                "high_water_mark": iso_utc(self.high_water_mark),
                "previous_high_water_mark": _iso(self.previous_high_water_mark)}

    def describe(self) -> str:
        """What the publish did for the view, as its task log says it."""
        what = ("all of it (full reprocess)" if self.start is None or self.end is None
                else f"[{iso_utc(self.start)}, {iso_utc(self.end)})")
        kind = " as a restatement" if self.restatement else ""
        mark = iso_utc(self.high_water_mark)
        moved = (f"high-water mark stays at {mark}"
                 if self.previous_high_water_mark in (None, self.high_water_mark)
                 else f"high-water mark moved from {iso_utc(self.previous_high_water_mark)} "
                      f"to {mark}")
        return (f"{self.view}: published {what}{kind}, {self.rows} rows, view version "
                f"{self.view_version} at Delta version {self.delta_version}; {moved}")


def publish(settings: Settings, plan: BatchPlan, written: list[dict[str, Any]]
            ) -> list[Published]:
    """Make the gated results visible; return what each view published.

    A recompute's staged slices are copied into the tables readers use (one commit per
    view), then its interval is published (the mark may advance; a restated interval was
    published before, so it stays) and a restatement is logged, and last the staging tables
    are removed (and those failed runs left past ``batch.failed_staging_keep_hours``). Each
    step is harmless to repeat, so a retried publish finishes the work. A full reprocess
    switches readers to the new versions (carrying over, gated, what runs published
    meanwhile) and leaves the publication log as it is.
    """
    from lambdalake.batch.publication import Publication, high_water_marks
    from lambdalake.batch.publication import publish as log_publications
    from lambdalake.batch.restatement import record_restatement
    from lambdalake.batch.staging import discard_run, discard_stale, promote_run
    from lambdalake.batch.written import SliceWritten
    from lambdalake.lake.delta_rs import table_version
    from lambdalake.views.catalog import physical_table

    slices = [SliceWritten.from_xcom(w) for w in written]
    if plan.full_reprocess:
        for built in slices:  # forked steps: delta-rs' runtime must not exist here before them
            run_gate(["switch", "--views", built.view, "--version", str(built.view_version),
                      "--run-id", plan.run_id], job="batch_views")
        versions = {built.view: built.view_version for built in slices}
        before = high_water_marks(settings)  # the switch leaves the publication log as it is
    else:
        assert plan.start is not None and plan.end is not None
        before = high_water_marks(settings)
        views = [w.view for w in slices]
        versions = promote_run(settings, plan.run_id, plan.start, plan.end,
                               {w.view: w.bronze_version for w in slices})
        log_publications(settings, [
            Publication(w.view, plan.start, plan.end, versions[w.view], w.bronze_version,
                        plan.run_id)
            for w in slices
        ])
        if plan.restating:
            record_restatement(settings, plan.start, plan.end, plan.restating,
                               {w.view: w.bronze_version for w in slices}, plan.run_id)
        discard_run(settings, plan.run_id, plan.start, plan.end, views)
        for stale in discard_stale(settings):
            log.info("removed the staging table %s of a run that did not publish", stale)
    marks = high_water_marks(settings)
    restated = plan.restating or {}
    return [Published(
        w.view, plan.start, plan.end, marks.of(w.view), versions[w.view],
        table_version(settings.table_path(physical_table(w.view, versions[w.view]))),
        w.rows, w.view in restated, plan.full_reprocess, before.of(w.view),
    ) for w in slices]


def announce(outlet_events: Any, published: list[Published]) -> None:
    """Emit one asset event for each view ``publish`` published, on the view's asset through
    the ``PUBLISHED_ALIAS`` outlet (``outlet_events`` is the task's accessor mapping), with
    what it published as the extra: no event for a view the run left alone."""
    from airflow.sdk import Asset, AssetAlias

    from lambdalake.views import PUBLISHED_ALIAS, view_asset_uri

    alias = outlet_events[AssetAlias(PUBLISHED_ALIAS)]
    for view in published:
        alias.add(Asset(uri=view_asset_uri(view.view)), extra=view.asset_extra())


def _parse_utc(text: str | None) -> datetime | None:
    return None if text is None else parse_utc(text)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else iso_utc(moment)
