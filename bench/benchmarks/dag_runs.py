"""Batch DAG benchmark: what one hourly run and an hourly backfill cost through Airflow, with
batch tasks as Spark Connect clients (``spark.batch_tasks=connect``) against the baseline
of a Spark driver per task (``driver``), in the same run on the same stack.

A whole stack comes up as ``make up`` runs it (PostgreSQL, Kafka, the Spark Connect server,
Airflow, ingest, speed, serving) with hourly batch intervals. ``HOURLY_EVENTS`` events per
hour of event time (with late and duplicate ones) for the profile's hours go through Kafka
into bronze. Then, for each path (Airflow restarted with the other ``batch_tasks``; the
stack's settings, its traffic, the runs and the backfill come from
``bench.harness.airflow_runs``):

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
from datetime import datetime, timedelta
from typing import Any

from bench.harness.airflow_runs import (
    DAG_ID,
    backfill,
    first_hour,
    fresh_stack,
    hourly_runs,
    produce_hours,
    wait_until_idle,
)
from bench.harness.common import ResourceSampler, Result
from lambdalake.operations.platform import Platform
from lambdalake.orchestration.airflow_api import admin_client
from lambdalake.settings import Settings

HOURS = {"quick": 12, "full": 168}
DRIVER_BACKFILL_HOURS = {"quick": 4, "full": 6}
ROUNDS = 3
GOAL_RUN_SECONDS = 30
GOAL_BACKFILL_MINUTES = 30  # for 168 hourly runs


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
    with fresh_stack(start) as platform:
        produced = produce_hours(platform.settings, start, hours)
        connect = measure_path(platform, start, hours)
        restarted = restart_airflow(platform, "driver")
        driver = measure_path(restarted, start, DRIVER_BACKFILL_HOURS[profile])
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
