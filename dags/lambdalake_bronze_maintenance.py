"""Daily bronze maintenance: compact the closed event-date partitions of the forever store.

The ingest stream appends small files every micro-batch; once a day is closed (the day
before the run's data interval ends), OPTIMIZE rewrites its files into large ones. Blind
appends of late events into a closed day never conflict with the compaction.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, task

from lambdalake.settings import get_settings

settings = get_settings()


@dag(
    dag_id="lambdalake_bronze_maintenance",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    tags=["lambdalake", "bronze", "maintenance"],
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1),
                  "retry_exponential_backoff": True},
)
def lambdalake_bronze_maintenance() -> None:
    @task(pool=settings.airflow.spark_pool, execution_timeout=timedelta(hours=1))
    def compact(data_interval_end: datetime | None = None) -> None:
        """OPTIMIZE every event-date partition older than yesterday (relative to the run)."""
        from lambdalake.orchestration.spark_jobs import run_spark_job

        assert data_interval_end is not None
        closed_before = (data_interval_end - timedelta(days=1)).date().isoformat()
        run_spark_job("compact_bronze", ["--before", closed_before])

    compact()


lambdalake_bronze_maintenance()
