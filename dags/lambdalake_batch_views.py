"""The batch layer: recompute every view for each interval of event time, gate, publish.

wait_for_bronze → gate_bronze → compute → gate_views → publish. The wait is a sensor in
reschedule mode (no worker slot held while ingest catches up). ``compute`` writes staging
tables no reader sees, ``gate_views`` validates them, and only ``publish`` copies them into
the tables the serving layer reads (write-audit-publish). Spark steps run as child
processes (``spark_jobs/``) in the ``spark`` pool, which bounds concurrent Spark jobs.
``publish`` advances each view's high-water mark and emits an asset event for each view
it published, on the view's asset ``lambdalake://views/<view>`` (through the alias
``lambdalake_published_views``; the extra says the interval, the mark, the Delta version
and whether it was a restatement or a full reprocess): the serving DAG runs on any of
them, a DAG of yours on the one view it needs. DAG ``lambdalake_restatement`` triggers runs of
published intervals that late rows reached since (``restate__…`` run ids, their late rows
in the conf, a note naming the cause). A run computes the data interval its page shows:
the trigger form's default (logical date "now") gives the last whole batch interval before
it (the timetable, ``BatchIntervals``, counts them from the first day); *Data Interval:
Specify Manually*, or ``lambdalake recompute``, any interval aligned to the views' slide.
Backfill with Airflow's own command (the *Backfill* dialog's *All Runs*)::

    lambdalake airflow backfill create --dag-id lambdalake_batch_views \\
        --from-date 2026-11-18 --to-date 2026-11-20 --reprocess-behavior completed
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from airflow.sdk import AssetAlias, Param, PokeReturnValue, dag, task
from airflow.sdk.types import DagRunProtocol

from lambdalake.orchestration.schedule import BatchIntervals
from lambdalake.settings import get_settings
from lambdalake.views import PUBLISHED_ALIAS
from lambdalake.views.definition import view_names

settings = get_settings()
batch = settings.batch
PUBLISHED_VIEWS = AssetAlias(PUBLISHED_ALIAS)
FIRST_MIDNIGHT = datetime.combine(batch.first_day, datetime.min.time(), tzinfo=UTC)
spark_task = partial(task, pool=settings.airflow.spark_pool,
                     execution_timeout=timedelta(minutes=batch.task_timeout_minutes))


@dag(
    dag_id="lambdalake_batch_views",
    schedule=BatchIntervals(timedelta(seconds=batch.interval_seconds), FIRST_MIDNIGHT),
    start_date=FIRST_MIDNIGHT,
    catchup=batch.catchup,
    max_active_runs=batch.max_active_runs,
    tags=["lambdalake", "batch"],
    default_args={"retries": batch.retries,
                  "retry_delay": timedelta(seconds=batch.retry_delay_seconds),
                  "retry_exponential_backoff": True, "max_retry_delay": timedelta(minutes=10)},
    params={
        "views": Param(view_names(), type="array", items={"type": "string",
                                                          "enum": view_names()},
                       examples=view_names(),  # the form's multi-select offers these
                       minItems=1, uniqueItems=True, title="Views",
                       description="Which views to recompute (default: all)."),
        "full_reprocess": Param(False, type="boolean", title="Full reprocess",
                                description="Recompute the chosen views from all of bronze into"
                                            " new versions, validate, then switch readers."),
    },
    doc_md=__doc__,
)
def lambdalake_batch_views() -> None:
    @task
    def plan(params: dict[str, Any], data_interval_start: datetime | None = None,
             data_interval_end: datetime | None = None, dag_run: DagRunProtocol | None = None,
             run_id: str | None = None) -> dict[str, Any]:
        """Check the trigger form and fix the interval, views and mode of this run."""
        from lambdalake.batch.steps import plan_batch_run

        assert run_id is not None and dag_run is not None
        return plan_batch_run(params, data_interval_start, data_interval_end, run_id,
                              conf=dag_run.conf).to_xcom()

    @task.sensor(poke_interval=batch.completeness_poke_seconds, mode="reschedule",
                 timeout=timedelta(hours=batch.completeness_timeout_hours))
    def wait_for_bronze(planned: dict[str, Any]) -> PokeReturnValue:
        """The forever store holds every record (events in bronze, changes in the reference
        changelog) that arrived before interval end + lateness."""
        from lambdalake.batch.steps import BatchPlan, completeness_moment
        from lambdalake.ingest.completeness import store_completeness

        run = BatchPlan.from_xcom(planned)
        if run.full_reprocess:
            return PokeReturnValue(is_done=True)
        completeness = store_completeness(settings, completeness_moment(run))
        print(completeness.describe())
        return PokeReturnValue(is_done=completeness.complete)

    @spark_task
    def gate_bronze(planned: dict[str, Any]) -> int | None:
        """Quality gate on the interval's bronze rows (critical failures stop the run); the
        bronze version it gated is the one compute reads."""
        from lambdalake.batch.steps import BatchPlan, gate_bronze

        return gate_bronze(BatchPlan.from_xcom(planned))

    @spark_task
    def compute(planned: dict[str, Any], bronze_version: int | None) -> list[dict[str, Any]]:
        """Stage the interval's view slices from the gated bronze version (or build new
        versions): no reader sees them yet."""
        from lambdalake.batch.steps import BatchPlan, compute

        return compute(BatchPlan.from_xcom(planned), bronze_version)

    @spark_task
    def gate_views(planned: dict[str, Any], written: list[dict[str, Any]]) -> None:
        """Quality gate on exactly what compute wrote."""
        from lambdalake.batch.steps import BatchPlan, gate_views

        gate_views(settings, BatchPlan.from_xcom(planned), written)

    @spark_task(outlets=[PUBLISHED_VIEWS])
    def publish(planned: dict[str, Any], written: list[dict[str, Any]],
                outlet_events: Any = None) -> list[dict[str, Any]]:
        """Copy the gated slices into the served tables and advance the high-water marks (or
        switch versions), then announce each view published on its asset."""
        from lambdalake.batch.steps import BatchPlan, announce, publish

        published = publish(settings, BatchPlan.from_xcom(planned), written)
        for view in published:
            print(view.describe())
        announce(outlet_events, published)
        return [view.asset_extra() for view in published]

    planned = plan()
    gated_bronze = gate_bronze(planned)
    written = compute(planned, gated_bronze)
    wait_for_bronze(planned) >> gated_bronze
    gate_views(planned, written) >> publish(planned, written)


lambdalake_batch_views()
