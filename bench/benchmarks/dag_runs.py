"""Batch DAG benchmark: what one hourly run and an hourly backfill cost through Airflow, with
batch tasks as Spark Connect clients (``spark.batch_tasks=connect``) against the baseline
of a Spark driver per task (``driver``), in the same run on the same stack.

A whole stack comes up as ``make up`` runs it (PostgreSQL, Kafka, the Spark Connect server,
Airflow, ingest, speed, serving) with hourly batch intervals. ``HOURLY_EVENTS`` events per
hour of event time (with late and duplicate ones) for the profile's hours go through Kafka
into bronze. Then, for each path (Airflow restarted with the other ``batch_tasks``):

* **one hourly run**, triggered with the interval as its parameters, ``ROUNDS`` times on
  different hours: from ``plan`` starting to ``publish`` ending (Airflow's own task times),
  and from the trigger to the run's end (scheduling included). A scheduled hour runs on a
  stack that has been up for a while, so the first run after Airflow starts (which warms
  the Connect server's JIT and the workers) is reported apart, not in the median;
* **an hourly backfill** with Airflow's own command, two runs at a time, over the
  profile's hours for Connect and ``DRIVER_BACKFILL_HOURS`` for the baseline (a driver per
  task costs minutes per run): wall time from the command to the backfill's completion,
  and per run;
* the **memory** of the Connect server: resident when idle, and its peak under the
  backfill.

Ingest and the speed layer run throughout, as in production.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.harness.common import ResourceSampler, Result
from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.ingest.service import wait_caught_up
from lambdalake.kafka.producer import EventProducer
from lambdalake.operations.platform import Platform
from lambdalake.orchestration.airflow_api import AirflowClient, admin_client
from lambdalake.settings import Settings, isolated_environment

DAG_ID = "lambdalake_batch_views"
HOURS = {"quick": 12, "full": 168}
DRIVER_BACKFILL_HOURS = {"quick": 4, "full": 6}
HOURLY_EVENTS = 5_000
ROUNDS = 3
GOAL_RUN_SECONDS = 30
GOAL_BACKFILL_MINUTES = 30  # for 168 hourly runs


def first_hour(hours: int) -> datetime:
    """Where the traffic starts: ``hours`` whole hours ending two hours before now."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return now - timedelta(hours=hours + 2)


def stack_environment(start: datetime, batch_tasks: str) -> dict[str, str]:
    return {
        **isolated_environment("bench-dag-runs", slot=6),
        "LAMBDALAKE_BATCH__INTERVAL": "1 hour",
        "LAMBDALAKE_BATCH__START_DATE": str(start.date()),
        "LAMBDALAKE_BATCH__CATCHUP": "false",  # only the newest hour is scheduled
        "LAMBDALAKE_BATCH__COMPLETENESS_POKE_SECONDS": "10",
        "LAMBDALAKE_SPARK__BATCH_TASKS": batch_tasks,
    }


@contextmanager
def exported(environment: dict[str, str]) -> Iterator[None]:
    """These variables in this process's environment (the stack's processes inherit it)."""
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def produce_hours(settings: Settings, start: datetime, hours: int) -> int:
    """``HOURLY_EVENTS`` per hour of event time from ``start``, into bronze; events produced."""
    count = HOURLY_EVENTS * hours
    profile = TrafficProfile(count=count, seed=730, start_time=start + timedelta(seconds=30),
                             event_time_rate=HOURLY_EVENTS / 3600, late_fraction=0.02,
                             duplicate_fraction=0.01, malformed_fraction=0.0)
    producer = EventProducer(settings.kafka, settings.kafka.events_topic.name)
    manifest = produce_traffic(TrafficGenerator(profile), producer)
    wait_caught_up(settings)
    return manifest.produced


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def task_seconds(client: AirflowClient, run_id: str) -> dict[str, float]:
    """Each task's duration in a run, and ``run``: plan's start to publish's end."""
    instances = {task: client.task_instance(DAG_ID, run_id, task)
                 for task in ("plan", "wait_for_bronze", "gate_bronze", "compute",
                              "gate_views", "publish")}
    seconds = {task: round(ti["duration"] or 0.0, 1) for task, ti in instances.items()}
    seconds["run"] = round((datetime.fromisoformat(instances["publish"]["end_date"])
                            - datetime.fromisoformat(instances["plan"]["start_date"])
                            ).total_seconds(), 1)
    return seconds


def hourly_runs(client: AirflowClient, hours: list[datetime]) -> list[dict[str, float]]:
    """One triggered run per hour, one after another; their task times."""
    measured = []
    for hour in hours:
        triggered = time.monotonic()
        run_id = client.trigger(DAG_ID, conf={"start": iso(hour),
                                              "end": iso(hour + timedelta(hours=1))})
        state = client.wait_for_run(DAG_ID, run_id)
        if state != "success":
            raise RuntimeError(f"run {run_id} ended {state}")
        measured.append({**task_seconds(client, run_id),
                         "trigger_to_end": round(time.monotonic() - triggered, 1)})
        print(f"  hourly run {iso(hour)}: {measured[-1]}", flush=True)
    return measured


def backfill(client: AirflowClient, start: datetime, hours: int) -> dict[str, Any]:
    """Airflow's own backfill of ``hours`` hourly runs, two at a time; its wall time."""
    last = start + timedelta(hours=hours - 1)
    command = [str(Path(sys.executable).parent / "lambdalake"), "airflow", "backfill",
               "create", "--dag-id", DAG_ID, "--from-date", iso(start), "--to-date", iso(last),
               "--max-active-runs", "2", "--reprocess-behavior", "completed"]
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    created = client.latest_backfill(DAG_ID)
    assert created is not None
    client.wait_for_backfill(created["id"], timeout=4 * 3600)
    seconds = time.monotonic() - started
    runs = [r for r in client.dag_runs(DAG_ID, run_type="backfill")
            if start <= datetime.fromisoformat(r["data_interval_start"]) <= last]
    failed = [r["dag_run_id"] for r in runs if r["state"] != "success"]
    if len(runs) != hours or failed:
        raise RuntimeError(f"backfill: {len(runs)} runs of {hours}, failed: {failed}")
    return {"hours": hours, "seconds": round(seconds, 1),
            "seconds_per_run": round(seconds / hours, 1)}


def wait_until_idle(client: AirflowClient, timeout: float = 900.0) -> None:
    """Until no run of the DAG is queued or running (the scheduled newest hour)."""
    deadline = time.monotonic() + timeout
    while client.active_runs(DAG_ID):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{DAG_ID} still has active runs after {timeout:.0f}s")
        time.sleep(5)


def measure_path(platform: Platform, start: datetime, backfill_hours: int
                 ) -> dict[str, Any]:
    client = admin_client(platform.settings)
    client.wait_for_dag(DAG_ID)
    client.unpause(DAG_ID)
    wait_until_idle(client)
    first, *runs = hourly_runs(client, [start + timedelta(hours=h) for h in range(ROUNDS + 1)])
    processes = {p.name: p for p in platform.processes() if p.name == "spark-connect"}
    with ResourceSampler(processes) as sampler:
        filled = backfill(client, start, backfill_hours)
    client.pause(DAG_ID)
    return {"first_run": first, "runs": runs, "backfill": filled,
            "memory": sampler.figures() if processes else {}}


def restart_airflow(platform: Platform, batch_tasks: str) -> Platform:
    """Airflow again, its tasks on the other path (the rest of the stack keeps running)."""
    platform.airflow.stop()
    os.environ["LAMBDALAKE_SPARK__BATCH_TASKS"] = batch_tasks
    restarted = Platform(Settings())
    restarted.airflow.start()
    return restarted


def run(settings: Settings, profile: str) -> list[Result]:
    del settings  # this benchmark runs a whole stack of its own
    hours = HOURS[profile]
    start = first_hour(hours)
    with exported(stack_environment(start, "connect")):
        platform = Platform(Settings())
        platform.clean()
        platform.up()
        try:
            produced = produce_hours(platform.settings, start, hours)
            connect = measure_path(platform, start, hours)
            platform = restart_airflow(platform, "driver")
            driver = measure_path(platform, start, DRIVER_BACKFILL_HOURS[profile])
        finally:
            platform.down()
    connect_run = statistics.median(r["run"] for r in connect["runs"])
    driver_run = statistics.median(r["run"] for r in driver["runs"])
    details = {"events": produced, "hours": hours, "connect": connect, "driver": driver}
    return [
        Result("batch DAG: one hourly run, plan start to publish end (median)", "s",
               connect_run, driver_run, "a Spark driver per task",
               f"< {GOAL_RUN_SECONDS} s", details),
        Result(f"batch DAG: backfill, seconds per hourly run ({hours} Connect, "
               f"{driver['backfill']['hours']} driver runs, 2 at a time)", "s",
               connect["backfill"]["seconds_per_run"], driver["backfill"]["seconds_per_run"],
               "a Spark driver per task",
               f"168 runs < {GOAL_BACKFILL_MINUTES} min "
               f"(< {GOAL_BACKFILL_MINUTES * 60 / 168:.1f} s per run)"),
    ]
