"""Where an ingest micro-batch's time goes: a diagnostic beside the ingest benchmark (no goal
and no baseline: it explains that benchmark's figures, it does not make one).

    python -m bench.diagnostics.ingest_profile [--records 300000] [--per-batch 50000]
        [--malformed 0.01]

It brings up the benchmark's Kafka and registry, puts a backlog on a fresh topic, runs the
ingest query in this process (with Spark's UI on a free loopback port) until it has drained
the backlog, then prints each micro-batch's phases (Spark's progress report) and each
Spark job it ran, in order: bronze's write (which classifies and caches the batch), the
check whether anything is quarantined, quarantine's write; Delta's own jobs by their
names (a state rebuild is "Compute snapshot for version N"). Beside each batch it prints
the CPU the JVM's threads used by role since the batch before (``JvmThreadCpu``): Spark's
tasks, the JIT compilers, garbage collection and the rest (the driver's threads). A fresh
JVM's JIT compiles for minutes, on the cores the tasks need.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from bench.harness.common import backlog, bench_environment, fresh_run
from lambdalake.generator.traffic import produce_traffic
from lambdalake.ingest.stream import INGEST_SPARK_CONF, start_ingest
from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.topics import ensure_platform_topics
from lambdalake.operations.traffic import traffic_generator
from lambdalake.spark import get_spark

UI_CONF = {"spark.ui.enabled": "true", "spark.ui.port": "0"}  # 0: a free port
THREAD_ROLES = {"Executor task": "tasks", "C2 CompilerThre": "JIT", "C1 CompilerThre": "JIT",
                "GC Thread": "GC", "VM Thread": "GC"}
"""A JVM thread's role by the start of its name (Linux keeps a thread's first 15 characters)."""


class JvmThreadCpu:
    """CPU seconds a JVM's threads used, by role (``THREAD_ROLES``, else "other").

    A thread's name is read from ``/proc/<pid>/task``. Spark's task threads end when idle a
    minute, so each thread's last reading is kept: a thread's CPU counts after it ends."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.threads: dict[int, tuple[str, float]] = {}  # thread id -> role, CPU seconds

    def sample(self) -> Counter[str]:
        for thread in self.process.threads():
            try:
                name = Path(f"/proc/{self.process.pid}/task/{thread.id}/comm").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            role = next((r for start, r in THREAD_ROLES.items() if name.startswith(start)),
                        "other")
            self.threads[thread.id] = (role, thread.user_time + thread.system_time)
        totals: Counter[str] = Counter()
        for role, seconds in self.threads.values():
            totals[role] += seconds
        return totals


def _seconds(job: dict[str, Any]) -> float:
    def moment(text: str) -> datetime:
        return datetime.strptime(text[:23], "%Y-%m-%dT%H:%M:%S.%f")

    return (moment(job["completionTime"]) - moment(job["submissionTime"])).total_seconds()


def _batch_and_what(job: dict[str, Any]) -> tuple[int | None, str]:
    """The micro-batch a job ran in (from its description) and what it did: Delta names its
    own jobs; the others are the batch's writes and checks, in the order they ran."""
    lines = (job.get("description") or "").splitlines()
    batch = next((int(line.split("=")[1].split(":")[0]) for line in lines
                  if line.startswith("batch =")), None)
    last = lines[-1] if lines else ""
    what = last.split(":", 1)[1].strip() if last.startswith("batch =") and ":" in last else ""
    return batch, what or f"a job of the batch ({job.get('numTasks', '?')} tasks)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--per-batch", type=int, default=50_000)
    parser.add_argument("--malformed", type=float, default=0.01)
    args = parser.parse_args()
    with bench_environment() as settings:
        run = fresh_run(settings, "profile")
        run.ingest = run.ingest.model_copy(update={
            "max_offsets_per_trigger": args.per_batch, "trigger_interval": "0 seconds"})
        produced = produce_traffic(traffic_generator(run, backlog(
            args.records, malformed_fraction=args.malformed, duplicate_fraction=0.02, seed=101)),
            EventProducer(run.kafka, run.kafka.events_topic.name)).produced
        spark = get_spark("ingest-profile", run, {**INGEST_SPARK_CONF, **UI_CONF})
        ensure_platform_topics(run.kafka)
        threads = JvmThreadCpu(spark._jvm.java.lang.ProcessHandle.current().pid())
        query = start_ingest(spark, run)
        progress: dict[int, dict[str, Any]] = {}
        cpu: dict[int, Counter[str]] = {-1: threads.sample()}  # by the last batch ended
        while sum(p["numInputRows"] for p in progress.values()) < produced:
            if query.exception() is not None:
                raise SystemExit(f"ingest failed: {query.exception()}")
            time.sleep(1)
            progress.update({p["batchId"]: p for p in query.recentProgress})
            if progress and max(progress) not in cpu:
                cpu[max(progress)] = threads.sample()
        query.stop()
        url = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/" \
              f"{spark.sparkContext.applicationId}/jobs"
        with urllib.request.urlopen(url) as answer:  # this process's own UI
            jobs = json.load(answer)
    by_batch: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for job in sorted(jobs, key=lambda j: j["jobId"]):
        batch, what = _batch_and_what(job)
        if batch is not None and "completionTime" in job:
            by_batch[batch].append((what, _seconds(job)))
    sampled = sorted(cpu)
    for batch_id in sorted(progress):
        ms = progress[batch_id]["durationMs"]
        print(f"batch {batch_id}: {progress[batch_id]['numInputRows']:,} records, "
              f"{ms['triggerExecution'] / 1000:.2f} s (addBatch {ms['addBatch'] / 1000:.2f}, "
              f"planning {ms['queryPlanning'] / 1000:.2f}, offsets "
              f"{(ms['walCommit'] + ms['commitOffsets']) / 1000:.2f})")
        if batch_id in cpu:
            since = sampled[sampled.index(batch_id) - 1]
            used = cpu[batch_id] - cpu[since]
            roles = ", ".join(f"{role} {used[role]:.2f} s"
                              for role in ("tasks", "JIT", "GC", "other"))
            print(f"    JVM CPU since {f'batch {since}' if since >= 0 else 'the start'}: {roles}")
        for what, seconds in by_batch[batch_id]:
            print(f"    {seconds:6.2f} s  {what}")


if __name__ == "__main__":
    main()
