"""Restatement benchmark: what restating one published hour costs, against a scheduled run
of the same hour, in the same warm SparkSession.

A day of bronze generated as the batch benchmark does
(``bench.harness.synthetic_bronze.ensure_bronze``, copied to a fresh lake so the cached
bronze stays as generated) is computed and published hour by hour. Then, per round:

* baseline, a scheduled run: one hour of all views staged and promoted
  (``stage_and_promote``) and its publication;
* a restatement: late events for that hour reach bronze (copies of the hour's events with
  new ids, as a client offline for days would send them); timed from the look for late
  rows (``LateArrivals.waiting``) and the plan (``plan_restatements``) to the recompute of
  the views waiting and their publication. Afterwards nothing may wait.

The Airflow runs around both are the same DAG with the same tasks, so this is the whole
difference: the look and the plan, and the views that waited.
"""

from __future__ import annotations

import shutil
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

from bench.harness.common import Result, Stopwatch
from bench.harness.synthetic_bronze import (
    START,
    cache_dir,
    ensure_bronze,
    lake_settings,
    shuffle_partitions,
)
from lambdalake.batch.late_arrivals import LateArrivals
from lambdalake.batch.publication import Publication, publish, read_publications
from lambdalake.batch.restatement import plan_restatements
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.settings import Settings
from lambdalake.views.definition import load_views
from tests.support.batch_runs import stage_and_promote

EVENTS = {"quick": 200_000, "full": 1_000_000}
ROUNDS = 3
LATE_EVENTS = 500
HOUR = START + timedelta(hours=6)


def fresh_lake(settings: Settings, events: int) -> Settings:
    """A copy of the cached bronze of ``events`` rows in a new lake (no views yet)."""
    source = lake_settings(settings, events).table_path(BRONZE_TABLE)
    root = settings.state_dir / "runs" / f"restatement-{uuid.uuid4().hex[:6]}"
    shutil.copytree(source, root / "lake" / BRONZE_TABLE)
    copy = settings.model_copy(deep=True)
    copy.state_dir = root / "state"
    copy.lake.root = str(root / "lake")
    copy.batch.start_date = START.date()
    return copy


def compute_and_publish(spark: Any, lake: Settings, names: list[str], start: Any, end: Any,
                        run_id: str) -> None:
    views = [load_views()[name] for name in names]
    written = stage_and_promote(spark, lake, views, start, end, run_id)
    publish(lake, [Publication(w.view, start, end, w.view_version, w.bronze_version, run_id)
                   for w in written])


def arrive_late(spark: Any, lake: Settings, round_: int) -> None:
    """``LATE_EVENTS`` copies of HOUR's events with new ids reach bronze in one commit."""
    from pyspark.sql import functions as F

    path = lake.table_path(BRONZE_TABLE)
    hour = (F.col("occurred_at") >= F.lit(HOUR)) & (
        F.col("occurred_at") < F.lit(HOUR + timedelta(hours=1)))
    late = (spark.read.format("delta").load(path).where(hour).limit(LATE_EVENTS)
            .withColumn("event_id", F.concat(F.lit(f"late{round_}-"), "event_id"))
            .withColumn("offset", F.col("offset") + F.lit(10**12 * (round_ + 1))))
    late.write.format("delta").mode("append").save(path)


def run(settings: Settings, profile: str) -> list[Result]:
    from lambdalake.spark import get_spark

    events = EVENTS[profile]
    tuned = settings.model_copy(deep=True)
    tuned.spark.shuffle_partitions = shuffle_partitions(events)
    spark = get_spark("bench-restatement", tuned)
    try:
        ensure_bronze(spark, tuned, events)
        lake = fresh_lake(tuned, events)
        names = sorted(load_views())
        with Stopwatch() as day:
            for h in range(24):
                start = START + timedelta(hours=h)
                compute_and_publish(spark, lake, names, start, start + timedelta(hours=1),
                                    f"day-{h}")
        print(f"restatement benchmark: {events:,} events published hour by hour in "
              f"{day.seconds:.0f} s", flush=True)
        scheduled, restated, looks = [], [], []
        late_rows: dict[str, int] = {}
        arrivals = LateArrivals(lake, list(load_views().values()))
        for round_ in range(ROUNDS):
            with Stopwatch() as watch:
                compute_and_publish(spark, lake, names, HOUR, HOUR + timedelta(hours=1),
                                    f"scheduled-{round_}")
            scheduled.append(round(watch.seconds, 2))
            arrivals.waiting()  # the previous look of a cycle: the scheduled run's commits
            arrive_late(spark, lake, round_)
            with Stopwatch() as watch:
                started = time.perf_counter()
                (restatement,) = plan_restatements(arrivals.waiting(), read_publications(lake),
                                                   [], limit=4)
                looks.append(round(time.perf_counter() - started, 3))
                compute_and_publish(spark, lake, sorted(restatement.views), restatement.start,
                                    restatement.end, f"restate-{round_}")
            restated.append(round(watch.seconds, 2))
            late_rows = {name: late.rows for name, late in restatement.views.items()}
            left = {w.view: w.rows for w in arrivals.waiting() if w.rows}
            assert left == {}, f"late rows still wait after the restatement: {left}"
            assert (restatement.start, restatement.end) == (HOUR, HOUR + timedelta(hours=1))
            print(f"  round {round_ + 1}: scheduled {scheduled[-1]} s, restatement "
                  f"{restated[-1]} s (look and plan {looks[-1]} s)", flush=True)
    finally:
        spark.stop()
    details = {"events": events, "hour": HOUR.isoformat(), "late_events": LATE_EVENTS,
               "late_rows_per_view": late_rows, "scheduled_seconds": scheduled,
               "restatement_seconds": restated, "look_and_plan_seconds": looks,
               "bronze_cache": str(cache_dir(tuned, events))}
    return [Result(
        f"restating one published hour ({LATE_EVENTS} late events, 3 views), "
        f"{events / 1e6:g}M-event day", "s (median)", statistics.median(restated),
        statistics.median(scheduled), "a scheduled run's recompute and publication of the "
        "same hour", "ratio ~1: a restatement costs a scheduled run of its interval", details)]
