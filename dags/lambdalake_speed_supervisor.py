"""Supervisor of the streams: keep the speed layer and ingest running, fail visibly when the
speed layer is stale or behind.

``supervise``, then ``alert`` when it failed, and ``gate_realtime``. The speed application
is its own long-lived process, never a worker slot: ``supervise`` starts it unless it runs
(after a crash it resumes from its checkpoints), then fails the run when the newest
micro-batch is older than the freshness SLA while records wait, when a query stopped, or
when the Kafka lag grew over several checks in a row. One task per check keeps the
supervisor cheap (a task process costs seconds of CPU on a small machine).
``gate_realtime`` validates the real-time rows written since its last round, at most every
``speed.gate_every_seconds`` (off the stream, without Spark), records the verdicts in the
data-quality history, and fails with an alert when a critical expectation fails.
``keep_ingest`` starts ingest again after a crash, from its checkpoint (the batch layer's
completeness check waits for it meanwhile), and ``keep_spark_connect`` the batch tasks'
Spark Connect server (batch tasks wait ``spark.connect_wait_seconds`` for it). Pause this
DAG to keep a speed layer or ingest that was stopped on purpose down; the DAG is active
from the first ``make up``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, task

from lambdalake.settings import get_settings

settings = get_settings()


@dag(
    dag_id="lambdalake_speed_supervisor",
    schedule=timedelta(seconds=settings.speed.supervise_every_seconds),
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    is_paused_upon_creation=False,  # supervision is on from the first `make up`
    tags=["lambdalake", "speed", "supervisor"],
    dagrun_timeout=timedelta(minutes=10),
    doc_md=__doc__,
)
def lambdalake_speed_supervisor() -> None:
    @task(execution_timeout=timedelta(minutes=6))
    def supervise() -> str:
        """Start the speed layer unless it runs, then fail if it is stale or falling behind."""
        from airflow.sdk.exceptions import AirflowFailException

        from lambdalake.speed.supervisor import check_health, ensure_running

        print(ensure_running(get_settings()))
        health = check_health(get_settings())
        if not health.healthy:
            raise AirflowFailException(health.describe())
        return health.describe()

    @task(trigger_rule="one_failed")
    def alert() -> None:
        """Record the failure where operators look (the alerts log, and this task's log)."""
        from lambdalake.speed.supervisor import check_health, record_alert

        health = check_health(get_settings())
        path = record_alert(get_settings(), health.describe(), health.problems)
        print(f"ALERT recorded in {path}")

    @task(trigger_rule="all_done", execution_timeout=timedelta(minutes=5))
    def gate_realtime(run_id: str | None = None) -> str:
        """Validate the real-time rows written since the last round; fail on a critical
        failure (recorded in the quality history, and as an alert)."""
        from airflow.sdk.exceptions import AirflowFailException

        from lambdalake.quality.realtime_gate import run_realtime_gates
        from lambdalake.speed.supervisor import record_alert
        from lambdalake.views.definition import load_views

        settings = get_settings()
        results = run_realtime_gates(settings, load_views().values(), run_id=run_id)
        if results is None:
            return f"not due (every {settings.speed.gate_every_seconds}s)"
        for result in results:
            print(result.report())
        failed = [r for r in results if not r.success]
        if failed:
            problems = [r.summary() for r in failed]
            record_alert(settings, "real-time quality gate failed", problems)
            raise AirflowFailException("; ".join(problems))
        return f"{len(results)} views gated, all passed"

    @task(execution_timeout=timedelta(minutes=6))
    def keep_ingest() -> str:
        """Start ingest unless it runs (after a crash it resumes from its checkpoint)."""
        from lambdalake.ingest.service import ensure_ingest_running

        return ensure_ingest_running(get_settings())

    @task(execution_timeout=timedelta(minutes=5))
    def keep_spark_connect() -> str:
        """Start the batch tasks' Spark Connect server unless it runs (after a crash)."""
        from lambdalake.orchestration.spark_connect import SparkConnectServer, as_airflow_task

        return SparkConnectServer(as_airflow_task(get_settings())).start()

    checked = supervise()
    checked >> alert()
    checked >> gate_realtime()
    keep_ingest()
    keep_spark_connect()


lambdalake_speed_supervisor()
