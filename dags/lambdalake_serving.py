"""Serving maintenance: reconcile real-time rows with batch, then collapse and retire them.

Runs after every batch publish (an event on any view's asset, ``lambdalake://views/<view>``)
and on a short schedule, in one task that maintains every view in turn
(``lambdalake.serving.maintenance.maintain_views``). A view whose real-time values drift
from batch beyond the stated error fails the task after the other views were maintained:
the drift is in the ``serving_reconciliation`` table and the data-quality report (a verdict
per view), and nothing of that view is retired until it reconciles. No Spark: delta-rs and
DuckDB only.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import Asset, AssetAny, AssetOrTimeSchedule, DeltaTriggerTimetable, dag, task

from lambdalake.settings import get_settings
from lambdalake.views import view_asset_uri
from lambdalake.views.definition import view_names

settings = get_settings()


@dag(
    dag_id="lambdalake_serving",
    schedule=AssetOrTimeSchedule(
        timetable=DeltaTriggerTimetable(
            timedelta(minutes=settings.serving.maintain_every_minutes)),
        # any view published (a list would be AssetAll: every view, each time)
        assets=AssetAny(*(Asset(uri=view_asset_uri(view)) for view in view_names())),
    ),
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,  # the real-time store must not grow while nobody looks
    tags=["lambdalake", "serving"],
    dagrun_timeout=timedelta(minutes=30),
    doc_md=__doc__,
)
def lambdalake_serving() -> None:
    @task(execution_timeout=timedelta(minutes=20))
    def maintain(run_id: str | None = None) -> list[str]:
        """Reconcile each view's real-time rows with batch; collapse and retire where they agree."""
        from airflow.sdk.exceptions import AirflowFailException

        from lambdalake.serving.maintenance import maintain_views
        from lambdalake.views.definition import load_views

        reports = maintain_views(get_settings(), load_views().values(), run_id)
        failed = [report.gate.report() for report in reports if not report.gate.success]
        if failed:
            raise AirflowFailException("\n\n".join(failed))
        return [report.summary() for report in reports]

    maintain()


lambdalake_serving()
