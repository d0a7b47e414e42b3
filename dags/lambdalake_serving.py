"""Serving maintenance: reconcile real-time rows with batch, then collapse and retire them.

Runs after every batch publish (the ``lambdalake_batch_views`` asset) and on a short
schedule, one mapped task per view (``lambdalake.serving.maintenance.maintain``). A view
whose real-time values drift from batch beyond the stated error fails its task: the drift
is in the ``serving_reconciliation`` table and the data-quality report, and nothing of
that view is retired until it reconciles. No Spark: delta-rs and DuckDB only.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import Asset, AssetOrTimeSchedule, DeltaTriggerTimetable, dag, task

from lambdalake.settings import get_settings
from lambdalake.views import PUBLISHED_ASSET
from lambdalake.views.definition import view_names

settings = get_settings()


@dag(
    dag_id="lambdalake_serving",
    schedule=AssetOrTimeSchedule(
        timetable=DeltaTriggerTimetable(
            timedelta(minutes=settings.serving.maintain_every_minutes)),
        assets=[Asset(PUBLISHED_ASSET)],
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
    def maintain(view: str, run_id: str | None = None) -> str:
        """Reconcile one view's real-time rows with batch; collapse and retire if they agree."""
        from airflow.exceptions import AirflowFailException

        from lambdalake.serving.maintenance import maintain as maintain_view
        from lambdalake.views.definition import load_views

        report = maintain_view(get_settings(), load_views()[view], run_id)
        print(report.summary())
        if not report.gate.success:
            raise AirflowFailException(report.gate.report())
        return report.summary()

    maintain.expand(view=view_names())


lambdalake_serving()
