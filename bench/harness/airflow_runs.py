"""The batch DAG through Airflow on a stack of the benchmark's own, as the ``dag_runs``
benchmark and the ``backfill_profile`` diagnostic both run it: the stack's environment, the
hours of traffic it holds, triggered hourly runs with their task times, and Airflow's own
backfill."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.ingest.service import wait_caught_up
from lambdalake.kafka.producer import EventProducer
from lambdalake.operations.platform import Platform
from lambdalake.orchestration.airflow_api import AirflowClient
from lambdalake.settings import Settings, isolated_environment

DAG_ID = "lambdalake_batch_views"
HOURLY_EVENTS = 5_000
TASKS = ("plan", "wait_for_bronze", "gate_bronze", "compute", "gate_views", "publish")
"""The DAG's tasks, in the order a run runs them."""


def first_hour(hours: int) -> datetime:
    """Where the traffic starts: ``hours`` whole hours ending two hours before now."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    return now - timedelta(hours=hours + 2)


def stack_environment(start: datetime, batch_tasks: str) -> dict[str, str]:
    """The stack's settings: hourly intervals from ``start``'s day with only the newest hour
    scheduled, batch tasks on ``batch_tasks`` (``connect`` or ``driver``)."""
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


@contextmanager
def fresh_stack(start: datetime) -> Iterator[Platform]:
    """A whole stack from empty state for hourly runs from ``start`` (its settings exported,
    batch tasks on the Connect server), stopped afterwards whatever happened."""
    with exported(stack_environment(start, "connect")):
        platform = Platform(Settings())
        platform.clean()
        platform.up()
        try:
            yield platform
        finally:
            platform.down()  # by pid files: a Platform made again in between stops alike


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
    """A moment as Airflow's API and command line take it."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def task_seconds(client: AirflowClient, run_id: str) -> dict[str, float]:
    """Each task's duration in a run, and ``run``: plan's start to publish's end."""
    instances = {task: client.task_instance(DAG_ID, run_id, task) for task in TASKS}
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
        run_id = client.trigger(DAG_ID, interval=(hour, hour + timedelta(hours=1)))
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
