"""Smoke pipeline: produce events to Kafka, copy them into Delta with Spark, check the table.

Runs on demand (``make demo`` triggers it). Proves that Kafka, Spark, Delta Lake and Airflow
work together on this stack before the real layers run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import Param, dag, task

from lambdalake.settings import get_settings

settings = get_settings()


@dag(
    dag_id="lambdalake_smoke",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["lambdalake", "smoke"],
    default_args={"retries": 2, "retry_delay": timedelta(seconds=15),
                  "retry_exponential_backoff": True},
    params={
        "events": Param(
            1000, type="integer", minimum=1, maximum=1_000_000,
            description="How many smoke events to produce to Kafka.",
        ),
    },
)
def lambdalake_smoke() -> None:
    @task(execution_timeout=timedelta(minutes=5))
    def produce(params: dict) -> int:
        """Produce the events; the broker acknowledges every one or the task fails."""
        from lambdalake.orchestration.smoke import produce_smoke_events

        return produce_smoke_events(settings, int(params["events"]))

    @task(pool=settings.airflow.spark_pool, execution_timeout=timedelta(minutes=15))
    def kafka_to_delta(acknowledged: int) -> None:
        """Spark copies the topic into Delta exactly once per record and checks the count."""
        from lambdalake.orchestration.spark_jobs import run_spark_job

        run_spark_job("smoke")

    kafka_to_delta(produce())


lambdalake_smoke()
