"""Late-arrival detection benchmark: what a look for late rows costs, and that it does not
grow with bronze.

A lake written with delta-rs (no Kafka, no Spark): 30 days of hourly publications of
page_traffic and product_sales (720 windows each, every view row with its bronze lineage)
and a bronze table of many small commits, as ingest writes it: on-time traffic of the
newest hour, a few commits holding events days late. Figures, at two bronze sizes:

* the first look, which reads bronze's whole log once;
* a steady look after one new commit with a late event (the serving API's ``/freshness``
  and ``make status`` pay this), whose goal is < 1 s and no growth with bronze's commits.

Baseline, in the same run: opening bronze with delta-rs and reading its version, what any
reader of the table pays.
"""

from __future__ import annotations

import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.harness.common import Result
from lambdalake.batch.late_arrivals import LateArrivals
from lambdalake.batch.publication import Publication, publish
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.settings import Settings
from lambdalake.views.catalog import physical_table
from lambdalake.views.definition import load_views

START = datetime(2026, 10, 1, tzinfo=UTC)
DAYS = 30
COMMITS = {"quick": (300, 900), "full": (1_000, 3_000)}
STEADY_LOOKS = 10
TS = pa.timestamp("us", tz="UTC")
VIEWS = ("page_traffic", "product_sales")


def lake_settings(settings: Settings) -> Settings:
    """Settings for a new lake under the bench state dir, its schedule starting at START."""
    root = settings.state_dir / "runs" / f"late-arrivals-{uuid.uuid4().hex[:6]}"
    copy = settings.model_copy(deep=True)
    copy.state_dir = root / "state"
    copy.lake.root = str(root / "lake")
    copy.batch.start_date = START.date()
    return copy


def arrive(lake: Settings, number: int, hours_late: float) -> None:
    """One bronze commit of 20 events (10 page views, 10 purchases), ``hours_late`` behind
    the end of the published month."""
    moment = START + timedelta(days=DAYS) - timedelta(hours=hours_late)
    write_deltalake(lake.table_path(BRONZE_TABLE), pa.table({
        "event_id": [f"e{number}-{i}" for i in range(20)],
        "event_type": ["page_view", "purchase"] * 10,
        "occurred_at": pa.array([moment + timedelta(seconds=i) for i in range(20)], TS),
        "event_date": pa.array([moment.date()] * 20, pa.date32()),
    }), partition_by=["event_date"], mode="append")


def publish_month(lake: Settings, bronze_version: int) -> None:
    """Every hour of the 30 days published for both views, computed from ``bronze_version``."""
    hours = [START + timedelta(hours=h) for h in range(DAYS * 24)]
    for view in VIEWS:
        write_deltalake(lake.table_path(physical_table(view, 1)), pa.table({
            "window_start": pa.array(hours, TS),
            "bronze_version": pa.array([bronze_version] * len(hours), pa.int64()),
        }), partition_by=["window_start"], mode="overwrite")
        publish(lake, [Publication(view, hour, hour + timedelta(hours=1), 1, bronze_version,
                                   "bench") for hour in hours])


def grow_bronze(lake: Settings, commits: int, first: int) -> None:
    """On-time commits (the newest hour, not published) up to ``commits`` in all."""
    for number in range(first, commits):
        arrive(lake, number, hours_late=-0.5)


def looks(lake: Settings, commits: int, late_before: int) -> dict[str, Any]:
    """A first look, then steady looks each after one commit with events 3 days late
    (``late_before``: such commits made earlier, found again by the first look)."""
    views = [load_views()[name] for name in VIEWS]
    started = time.perf_counter()
    LateArrivals(lake, views).waiting()
    first = time.perf_counter() - started
    steady, baseline = [], []
    for number in range(STEADY_LOOKS):
        arrive(lake, 10**6 + commits * 100 + number, hours_late=72)
        started = time.perf_counter()
        waiting = LateArrivals(lake, views).waiting()
        steady.append(time.perf_counter() - started)
        started = time.perf_counter()
        DeltaTable(lake.table_path(BRONZE_TABLE)).version()
        baseline.append(time.perf_counter() - started)
    rows = {w.view: w.rows for w in waiting}
    late_page_views = 10 * (late_before + STEADY_LOOKS)
    assert rows == dict.fromkeys(VIEWS, late_page_views), rows  # every late event found
    return {"commits": commits, "first_look_s": round(first, 3),
            "steady_look_s": statistics.median(steady), "steady_max_s": max(steady),
            "baseline_s": statistics.median(baseline), "waiting_rows": rows}


def run(settings: Settings, profile: str) -> list[Result]:
    lake = lake_settings(settings)
    smaller, larger = COMMITS[profile]
    arrive(lake, 0, hours_late=-0.5)
    publish_month(lake, DeltaTable(lake.table_path(BRONZE_TABLE)).version())
    results: list[Result] = []
    built = 1
    for late_before, commits in ((0, smaller), (STEADY_LOOKS, larger)):
        started = time.perf_counter()
        grow_bronze(lake, commits, built)
        built = commits
        print(f"late-arrivals benchmark: bronze of {commits} commits in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        (lake.state_dir / "status" / "late-arrivals.json").unlink(missing_ok=True)
        measured = looks(lake, commits, late_before)
        results += [
            Result(f"late-arrival detection, steady look, bronze of {commits:,} commits, "
                   f"720 published hours x 2 views", "s (median)", measured["steady_look_s"],
                   measured["baseline_s"], "open bronze with delta-rs and read its version",
                   "< 1 s, not growing with bronze's commits", measured),
            Result(f"late-arrival detection, first look (whole log), bronze of {commits:,} "
                   f"commits", "s", measured["first_look_s"], None, None, None, measured),
        ]
    return results
