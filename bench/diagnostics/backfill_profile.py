"""Where a backfill's time goes: a diagnostic beside the ``dag_runs`` benchmark (no goal and
no baseline: it explains that benchmark's figure, it does not make one).

    python -m bench.diagnostics.backfill_profile [--hours 12] [--pause lambdalake_serving]

It brings up the benchmark's stack (batch tasks on the Spark Connect server), produces the
hours' traffic, warms up with one hourly run, then backfills the hours two runs at a time
while it samples the CPU of every process on the machine by role (the Connect server, each
kind of Spark step, Airflow's task processes, the scheduler, ...). It prints the CPU seconds
per run of each role and, from Airflow's task instances, each task's mean duration and the
mean gap before it (the scheduler's loop and a task's start). To see inside the server,
start a JFR recording on it by hand (``jcmd <pid> JFR.start``). ``--pause`` pauses other
DAGs for the backfill (its runs' publishes trigger the serving DAG), to see what they cost.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import threading
import time
from collections import Counter, defaultdict
from datetime import datetime

import psutil

from bench.harness.airflow_runs import (
    DAG_ID,
    TASKS,
    backfill,
    first_hour,
    fresh_stack,
    hourly_runs,
    produce_hours,
    wait_until_idle,
)
from lambdalake.orchestration.airflow_api import AirflowClient, admin_client

ROLES = (("SparkConnectServer", "spark-connect server"), ("kafka.Kafka", "kafka"),
         ("postgres", "postgres"), ("airflow scheduler", "airflow scheduler"),
         ("api_server", "airflow api-server"), ("dag-processor", "airflow dag-processor"),
         ("triggerer", "airflow triggerer"), ("uvicorn", "serving API"),
         ("lambdalake.serving", "serving API"))


def role(process: psutil.Process) -> str:
    """What a process is, from its command line (a forked step shows its script's)."""
    if process.pid == os.getpid():  # it walks every process five times a second
        return "this diagnostic's sampler"
    command = " ".join(process.cmdline())
    step = re.search(r"spark_jobs/(\w+)\.py(?:.*--layer (\w+))?", command)
    if step:
        return f"step {step.group(1)}" + (f" {step.group(2)}" if step.group(2) else "")
    if "from multiprocessing" in command:  # a spawned worker (the serving API has two)
        return f"{role(process.parent())}, spawned workers"
    if command.startswith("airflow worker -- "):  # titles name a task instance by id only
        return "airflow workers and task processes"
    named = next((name for marker, name in ROLES if marker in command), None)
    if named is None and "org.apache.spark.deploy.SparkSubmit" in command:
        return f"{role(process.parent())}, its JVM"  # a stream's (or a driver step's) driver
    return named or "other"


class CpuByRole:
    """CPU seconds of every process by role, sampled until stopped (processes that start
    and end between samples are missed; at 0.2 s, few are)."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self._seen: dict[tuple[int, float], list] = {}  # role, first, born inside, last
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            for process in psutil.process_iter():
                try:
                    times = process.cpu_times()
                    used = times.user + times.system
                    key = (process.pid, process.create_time())
                    entry = self._seen.setdefault(
                        key, [role(process), used, key[1] > self.started, used])
                    if not entry[0].startswith("step"):  # a forked step renames itself
                        entry[0] = role(process)
                    entry[3] = used
                except (psutil.Error, IndexError):
                    continue

    def __enter__(self) -> CpuByRole:
        self.started = time.time()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.wall = time.time() - self.started

    def seconds(self) -> Counter[str]:
        totals: Counter[str] = Counter()
        for name, first, born_inside, last in self._seen.values():
            totals[name] += last - (0.0 if born_inside else first)
        return totals


def task_timeline(client: AirflowClient) -> dict[str, tuple[float, float]]:
    """Per task of the backfill's runs: mean duration and mean gap before it (seconds)."""
    durations: dict[str, list[float]] = defaultdict(list)
    gaps: dict[str, list[float]] = defaultdict(list)
    for run in client.dag_runs(DAG_ID, run_type="backfill"):
        instances = {task: client.task_instance(DAG_ID, run["dag_run_id"], task)
                     for task in TASKS}
        previous_end = datetime.fromisoformat(run["start_date"])
        for task in TASKS:
            start = datetime.fromisoformat(instances[task]["start_date"])
            end = datetime.fromisoformat(instances[task]["end_date"])
            durations[task].append((end - start).total_seconds())
            gaps[task].append((start - previous_end).total_seconds())
            previous_end = end
    return {task: (statistics.mean(durations[task]), statistics.mean(gaps[task]))
            for task in TASKS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=int, default=12, help="hourly runs to backfill")
    parser.add_argument("--pause", action="append", default=[], metavar="DAG_ID",
                        help="a DAG paused during the backfill (repeatable)")
    arguments = parser.parse_args()
    hours = arguments.hours
    start = first_hour(hours)
    with fresh_stack(start) as platform:
        produce_hours(platform.settings, start, hours)
        client = admin_client(platform.settings)
        client.wait_for_dag(DAG_ID)
        client.unpause(DAG_ID)
        wait_until_idle(client)
        hourly_runs(client, [start])  # warms the server's JIT; replaced by the backfill
        for dag_id in arguments.pause:
            client.pause(dag_id)
        with CpuByRole() as cpu:
            filled = backfill(client, start, hours)
        timeline = task_timeline(client)
    paused = f", paused: {', '.join(arguments.pause)}" if arguments.pause else ""
    print(f"\nbackfill: {filled}; sampled {cpu.wall:.0f} s{paused}")
    for name, seconds in cpu.seconds().most_common():
        print(f"  {name:40s} {seconds / hours:6.2f} CPU-s per run  "
              f"{seconds / cpu.wall:5.2f} cores")
    print("tasks (mean over the backfill's runs): duration, gap before")
    for task, (duration, gap) in timeline.items():
        print(f"  {task:16s} {duration:5.1f} s  {gap:5.1f} s")


if __name__ == "__main__":
    main()
