"""Restatement: published intervals that late rows reached are recomputed, automatically.

Every ``batch.restate_every_minutes`` the one task reads bronze's Delta log for rows that
arrived after the slice of their window was published (``lambdalake.batch.late_arrivals``),
and triggers a run of ``lambdalake_batch_views`` for each such published interval (run id
``restate__<interval start>__<time>``, the interval as its data interval, the views waiting
in it and their late rows as ``restating`` in its conf, a note that links this DAG's run and
names the late rows; this run's note links each run it triggered): oldest first, at most
``batch.restate_max_intervals`` at a time, never beside a batch run of an overlapping
interval. Each run has the sensor, gates and ``replaceWhere`` of a scheduled run; its
publication leaves the high-water mark where it is and is logged in
``batch_restatements``. Rows waiting longer than ``batch.restate_warn_after`` record a
warning on the Data quality page. The DAG is active from the first ``make up``; pause it
to stop restating.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, task

from lambdalake.settings import get_settings

settings = get_settings()


@dag(
    dag_id="lambdalake_restatement",
    schedule=timedelta(minutes=settings.batch.restate_every_minutes),
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,  # late rows are restated from the first `make up`
    tags=["lambdalake", "batch", "restatement"],
    dagrun_timeout=timedelta(minutes=10),
    doc_md=__doc__,
)
def lambdalake_restatement() -> None:
    @task(execution_timeout=timedelta(minutes=5))
    def restate(run_id: str | None = None) -> list[str]:
        """Trigger batch runs for the published intervals late rows wait in."""
        from datetime import UTC

        from lambdalake.operations.restatement import restatement_cycle
        from lambdalake.orchestration.airflow_api import AirflowApiError, trigger_client

        assert run_id is not None
        current = get_settings()
        client = trigger_client(current)
        cycle = restatement_cycle(current, client, datetime.now(UTC), run_id)
        for line in cycle.describe():
            print(line)
        if (note := cycle.note()) is not None:  # this run's page links the runs it triggered
            try:
                client.set_note("lambdalake_restatement", run_id, note)
            except AirflowApiError as error:  # the runs are triggered: the note is only a link
                print(f"WARNING could not write this run's note: {error}")
        return [triggered for triggered, _ in cycle.triggered]

    restate()


lambdalake_restatement()
