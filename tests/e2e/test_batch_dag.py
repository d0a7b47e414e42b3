"""The batch DAG against the real stack, with ingest and the speed layer running: backfill
through Airflow's CLI (checked against the generator's ground truth), a compute task killed
mid-write and retried, events days late restated by DAG lambdalake_restatement, a full
reprocess triggered like the UI's form does it (with late events restated after its switch),
and a bad batch stopped at its gate. Every task is a client of the stack's Spark Connect
server; the last tests check the sessions' isolation and a server that dies.

The stack runs with a daily batch interval (a setting), so three days are three runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pandas as pd
import psutil
import pytest
from deltalake import DeltaTable

from lambdalake.batch.late_arrivals import LateArrivals
from lambdalake.batch.publication import high_water_marks, published_intervals
from lambdalake.batch.restatement import read_restatements
from lambdalake.batch.staging import staging_path
from lambdalake.generator.traffic import Manifest, TrafficGenerator, TrafficProfile, produce_traffic
from lambdalake.ingest.service import wait_caught_up
from lambdalake.kafka.producer import EventProducer
from lambdalake.lake.bronze import BRONZE_TABLE
from lambdalake.lake.delta_rs import delta_rs_uri
from lambdalake.operations.platform import Platform
from lambdalake.orchestration.airflow_api import AirflowClient
from lambdalake.orchestration.spark_connect import SparkConnectServer
from lambdalake.settings import Settings, isolated_environment
from lambdalake.stack.process import OneProcessComponent
from lambdalake.timeutil import iso_utc
from lambdalake.views.catalog import current_table_path, current_version, physical_table
from lambdalake.views.definition import load_views
from tests.support.airflow_ui import (
    backfill_from_the_dialog,
    pipeline_status,
    trigger_with_the_forms_defaults,
)
from tests.support.background import Background
from tests.support.browser import fenced_page, is_loopback_url, log_in
from tests.support.figures import Figures
from tests.support.ground_truth import (
    expected_view,
    manifest_events,
    manifest_records,
    row_differences,
    row_key,
)
from tests.support.merged_answers import merged_answer
from tests.support.reference_truth import reference_changes, with_attributes_as_of_event_time
from tests.support.tutorials import blocks, edited, redated, run_shell_block, triggered_run_id

DAG_ID = "lambdalake_batch_views"
TUTORIAL = "backfill.md"  # Backfill and restate: its commands run here
RESTATEMENT_DAG_ID = "lambdalake_restatement"
SUPERVISOR_DAG_ID = "lambdalake_speed_supervisor"
TODAY = datetime.now(UTC).date()
DAYS = [TODAY - timedelta(days=back) for back in (4, 3, 2)]
STACK_ENV = {
    **isolated_environment("test-batch", slot=5),
    "LAMBDALAKE_BATCH__INTERVAL": "1 day",
    "LAMBDALAKE_BATCH__START_DATE": str(TODAY - timedelta(days=1)),  # one scheduled run
    "LAMBDALAKE_BATCH__CATCHUP": "true",
    "LAMBDALAKE_BATCH__COMPLETENESS_POKE_SECONDS": "10",
    "LAMBDALAKE_BATCH__RESTATE_EVERY_MINUTES": "1",
    "LAMBDALAKE_BATCH__RESTATE_RETRY_AFTER_MINUTES": "1",  # a failed restatement's pause
    "LAMBDALAKE_SPARK__BATCH_TASKS": "connect",  # tasks are clients of the stack's server
    # the supervisor DAG is tested in test_platform; here it would only compete for 2 cores
    "LAMBDALAKE_SPEED__SUPERVISE_EVERY_SECONDS": "600",
}
LINEAGE = {"run_id", "bronze_version", "computed_at"}


def midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC)


def day_interval(day: date) -> tuple[datetime, datetime]:
    """``day`` as a triggered run's data interval."""
    return midnight(day), midnight(day + timedelta(days=1))


@pytest.fixture(scope="module")
def stack(fresh_platform: Callable[[dict[str, str]], AbstractContextManager[Platform]]
             ) -> Iterator[Platform]:
    with fresh_platform(STACK_ENV) as platform:
        yield platform


def produce(settings: Settings, profile: TrafficProfile) -> Manifest:
    producer = EventProducer(settings.kafka, settings.kafka.events_topic.name)
    manifest = produce_traffic(TrafficGenerator(profile), producer)
    assert manifest.failed == 0
    return manifest


@pytest.fixture(scope="module")
def traffic(stack: Platform) -> Manifest:
    """Three days of events with late, duplicate and malformed ones, in bronze."""
    manifest = produce(stack.settings, TrafficProfile(
        count=12_000, seed=404, start_time=midnight(DAYS[0]) + timedelta(minutes=1),
        event_time_rate=12_000 / (3 * 86_400 - 600), late_fraction=0.05,
        duplicate_fraction=0.03, malformed_fraction=0.01, users=300, pages=10, products=20))
    wait_caught_up(stack.settings)
    return manifest


@pytest.fixture(scope="module")
def client(stack: Platform, traffic: Manifest) -> AirflowClient:
    settings = stack.settings
    client = AirflowClient(settings.airflow.base_url, settings.airflow.admin_user,
                           stack.airflow.admin_password)
    client.wait_for_dag(DAG_ID)
    client.unpause(DAG_ID)  # the scheduled run (catch-up) runs beside the backfills
    client.wait_for_dag(RESTATEMENT_DAG_ID)
    client.pause(RESTATEMENT_DAG_ID)  # active from creation; the restatement tests resume it
    return client


def backfill(client: AirflowClient) -> list[dict[str, Any]]:
    """Backfill DAYS with Airflow's own CLI, the command of *Backfill and restate* as it is
    written there; return the runs once all finished."""
    command = blocks(TUTORIAL, "bash")[0]
    run_shell_block(redated(command, DAYS[0], DAYS[-1]), timeout=300)
    return finished_backfill_runs(client)


def finished_backfill_runs(client: AirflowClient) -> list[dict[str, Any]]:
    """The runs of DAYS of the DAG's latest backfill, once all finished."""
    latest = client.latest_backfill(DAG_ID)
    assert latest is not None
    client.wait_for_backfill(latest["id"])
    runs = [r for r in client.dag_runs(DAG_ID, run_type="backfill")
            if datetime.fromisoformat(r["data_interval_start"]).date() in DAYS]
    return sorted(runs, key=lambda r: r["data_interval_start"])


def view_rows(settings: Settings, days: list[date] = DAYS) -> dict[str, list[tuple]]:
    """Every view's rows for ``days`` (lineage aside), read without Spark, in a stable order."""
    first, last = midnight(days[0]), midnight(days[-1] + timedelta(days=1))
    contents = {}
    for name in load_views():
        table = DeltaTable(current_table_path(settings, name)).to_pyarrow_table().to_pylist()
        contents[name] = sorted(
            tuple(sorted((k, str(v)) for k, v in row.items() if k not in LINEAGE))
            for row in table if first <= row["window_start"].replace(tzinfo=UTC) < last
        )
    return contents


def differences_from_the_truth(settings: Settings, manifests: list[Manifest],
                               arriving: Manifest | None = None,
                               names: list[str] | None = None) -> dict[str, int]:
    """Per view (``names``, default all), how many keys of DAYS differ from the views
    computed with pandas from the generators' ``manifests`` (missing, extra, or another
    value of any measure). ``arriving``: traffic produced while the run read bronze; a window's truth
    holds those of its events that bronze held at the version the window's rows were
    computed from (their lineage)."""
    settled = pd.concat([manifest_events(manifest) for manifest in manifests])
    new = manifest_events(arriving) if arriving else settled.iloc[:0]
    changes = reference_changes([*manifests, *([arriving] if arriving else [])])
    first, last = midnight(DAYS[0]), midnight(DAYS[-1] + timedelta(days=1))
    differences = {}
    for name, view in load_views().items():
        if names is not None and name not in names:
            continue

        table = DeltaTable(current_table_path(settings, name)).to_pyarrow_table().to_pylist()
        rows = [r for r in table if first <= r["window_start"].replace(tzinfo=UTC) < last]
        read_at = {row_key(view, r)[0]: r["bronze_version"] for r in rows}  # a window: one read
        newest = max(read_at.values(), default=None)  # a window with no row: bronze now
        truth = []
        for version in {*read_at.values(), newest}:
            held = DeltaTable(settings.table_path(BRONZE_TABLE), version=version
                              ).to_pyarrow_table(columns=["event_id"]).column("event_id")
            events = with_attributes_as_of_event_time(pd.concat(
                [settled, new[new["event_id"].isin(set(held.to_pylist()))]]), view, changes)
            truth += [r for r in expected_view(events, view, first, last).to_dict("records")
                      if read_at.get(row_key(view, r)[0], newest) == version]
        differences[name] = len(row_differences(view, truth, rows))
    return differences


def test_a_three_day_backfill_succeeds_and_a_second_one_is_identical(
    stack: Platform, client: AirflowClient, traffic: Manifest
) -> None:
    """Two runs at a time, while ingest and the speed layer run: no write conflict fails a
    task, and every view equals the ground truth; backfilling again from Airflow's Backfill
    dialog (Chromium, "All Runs") re-runs the same runs and changes no row."""
    settings = stack.settings
    runs = backfill(client)
    assert [r["state"] for r in runs] == ["success"] * 3, runs
    assert retried_tasks(client, runs) == {}  # success by retries would hide a broken task
    first = view_rows(settings)
    assert all(first.values()), {name: len(rows) for name, rows in first.items()}
    assert differences_from_the_truth(settings, [traffic]) == dict.fromkeys(load_views(), 0)
    for name in load_views():
        assert [(s.date(), e - s) for s, e in published_intervals(settings, name)
                if s.date() in DAYS] == [(day, timedelta(days=1)) for day in DAYS]

    for run in runs:  # each run announced each view it published on the view's own asset
        events = view_asset_events(stack, run["dag_run_id"])
        assert set(events) == set(load_views()), (run["dag_run_id"], set(events))
        day = datetime.fromisoformat(run["data_interval_start"]).astimezone(UTC).date()
        for view, announced in events.items():
            assert [(e["start"], e["end"], e["restatement"], e["full_reprocess"])
                    for e in announced] == [(*map(iso_utc, day_interval(day)), False, False)], view
            assert announced[0]["rows"] == sum(
                1 for row in DeltaTable(current_table_path(settings, view)).to_pyarrow_table(
                    columns=["window_start"]).column("window_start").to_pylist()
                if row.date() == day), view

    with fenced_page(is_loopback_url, viewport={"width": 1400, "height": 1000}) as (page,
                                                                                    refused):
        log_in(page, stack)  # the Backfill dialog, as the DAG's docs say: "All Runs"
        backfill_from_the_dialog(page, stack, DAG_ID, DAYS[0], DAYS[-1], "All Runs",
                                 max_active_runs=2, runs=3, screenshot="backfill-dialog.png")
    assert refused == []
    created = client.latest_backfill(DAG_ID)
    assert created is not None and (
        created["from_date"], created["to_date"], created["reprocess_behavior"],
        created["max_active_runs"], created["dag_run_conf"]) == (
        f"{DAYS[0]}T00:00:00Z", f"{DAYS[-1]}T00:00:00Z", "completed", 2, None), created
    again = finished_backfill_runs(client)
    assert [r["state"] for r in again] == ["success"] * 3, again
    assert retried_tasks(client, again, earlier_tries=1) == {}
    assert [r["dag_run_id"] for r in again] == [r["dag_run_id"] for r in runs]  # the same runs, re-run
    assert view_rows(settings) == first  # row for row
    for run in again:  # a re-run publishes, and announces, again
        assert {view: len(e) for view, e in view_asset_events(stack, run["dag_run_id"]).items()
                } == dict.fromkeys(load_views(), 2)


def view_asset_events(stack: Platform, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """The extras of the asset events the batch DAG's run ``run_id`` emitted, per view, in
    the order Airflow recorded them (its REST API, as a downstream DAG's author sees them)."""
    settings = stack.settings
    base = settings.airflow.base_url
    token = httpx.post(f"{base}/auth/token", timeout=30, json={
        "username": settings.airflow.admin_user, "password": stack.airflow.admin_password,
    }).json()["access_token"]
    answer = httpx.get(f"{base}/api/v2/assets/events", timeout=30, params={
        "source_dag_id": DAG_ID, "source_run_id": run_id, "order_by": "timestamp",
        "limit": 1000}, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    events: dict[str, list[dict[str, Any]]] = {}
    for event in answer.json()["asset_events"]:
        assert event["uri"].startswith("lambdalake://views/"), event
        events.setdefault(event["uri"].removeprefix("lambdalake://views/"), []).append(
            event["extra"])
    return events


def retried_tasks(client: AirflowClient, runs: list[dict[str, Any]], earlier_tries: int = 0
                  ) -> dict[tuple[str, str], int]:
    """The Spark tasks of ``runs`` that needed more than one try (beyond ``earlier_tries``
    of runs re-run), and their try numbers."""
    tries = {(run["dag_run_id"], task): client.task_instance(
                 DAG_ID, run["dag_run_id"], task)["try_number"]
             for run in runs for task in ("gate_bronze", "compute", "gate_views", "publish")}
    return {key: number for key, number in tries.items() if number > 1 + earlier_tries}


def spark_driver(job: str, run_id: str, timeout: float = 600) -> psutil.Process:
    """The process a task of ``run_id`` started for ``spark_jobs/<job>.py``, once it runs.

    A forked step's command line is its process title, which ``/proc`` may give as one
    string: the words are compared, not ``argv``'s items."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in psutil.process_iter(["cmdline"]):
            words = " ".join(process.info["cmdline"] or []).split()
            if run_id in words and any(w.endswith(f"spark_jobs/{job}.py") for w in words):
                return process
        time.sleep(0.2)
    raise AssertionError(f"no {job} driver for {run_id} within {timeout:.0f}s")


def table_versions(settings: Settings) -> dict[str, int]:
    return {name: DeltaTable(current_table_path(settings, name)).version()
            for name in load_views()}


def slices_replaced(settings: Settings, day: date, since: dict[str, int]) -> list[str]:
    """The views with a commit after version ``since`` that replaced ``day``'s slice (the
    scheduled run of another day may commit to the same tables meanwhile): its predicate
    starts at the day's midnight, in Spark's spelling or delta-rs' (``arrow_cast(...)``)."""
    replaced, start = [], re.compile(rf"window_start >= \S*'{day}[T ]00:00:00")
    for name in load_views():
        table = DeltaTable(current_table_path(settings, name))
        new_commits = table.version() - since[name]
        if new_commits > 0 and any(
            start.search(commit.get("operationParameters", {}).get("predicate", ""))
            for commit in table.history(new_commits)
        ):
            replaced.append(name)
    return replaced


def views_staged(settings: Settings, run_id: str, day: date) -> list[str]:
    """The views whose slice of ``day`` the run ``run_id`` has staged (committed)."""
    start, end = midnight(day), midnight(day + timedelta(days=1))
    return [name for name in load_views() if DeltaTable.is_deltatable(
        delta_rs_uri(staging_path(settings, name, run_id, start, end)))]


@pytest.mark.chaos
def test_a_compute_task_killed_mid_write_is_retried_to_the_same_slices(
    stack: Platform, client: AirflowClient
) -> None:
    """SIGKILL compute's process (its Spark driver, or its Spark Connect client, whose
    orphaned query the server stops) once it staged one view's slice and before the
    others: no reader saw a staged row, Airflow retries the task, and every slice ends as
    the backfill above left it, row for row: nothing missing, nothing twice."""
    settings = stack.settings
    day = DAYS[2]
    reference = view_rows(settings, [day])
    assert all(reference.values()), "the backfill test above publishes the day first"
    before = table_versions(settings)
    run_id = client.trigger(DAG_ID, interval=day_interval(day))
    driver = spark_driver("batch_views", run_id)
    deadline = time.monotonic() + 600
    while not views_staged(settings, run_id, day):
        assert time.monotonic() < deadline, "compute staged no slice within 600 s"
        time.sleep(0.05)
    for process in [*driver.children(recursive=True), driver]:
        process.kill()
    staged = views_staged(settings, run_id, day)
    assert len(staged) < len(before), f"not mid-write: {staged} all staged"
    assert slices_replaced(settings, day, before) == []  # staged: no served slice replaced

    assert client.wait_for_run(DAG_ID, run_id, timeout=1200) == "success"
    assert client.task_instance(DAG_ID, run_id, "compute")["try_number"] == 2
    assert client.task_instance(DAG_ID, run_id, "gate_views")["try_number"] == 1
    assert view_rows(settings, [day]) == reference
    print(f"compute of {run_id} killed after staging {staged}; the retry restored {day}")


def tries(client: AirflowClient, run_id: str) -> dict[str, int]:
    """Each Spark task's try number in the run."""
    return {task: client.task_instance(DAG_ID, run_id, task)["try_number"]
            for task in ("gate_bronze", "compute", "gate_views", "publish")}


def run_through_an_outage(stack: Platform, client: AirflowClient, day: date,
                          component: OneProcessComponent, kill: bool,
                          after: Callable[[], None]) -> tuple[str, dict[str, int]]:
    """Re-run ``day`` and, once its compute staged a slice, stop ``component`` (SIGKILL
    with ``kill``) for 20 s, then start it again and call ``after``; return the run's final
    state and its tasks' tries."""
    settings = stack.settings
    run_id = client.trigger(DAG_ID, interval=day_interval(day))
    spark_driver("batch_views", run_id)
    deadline = time.monotonic() + 600
    while not views_staged(settings, run_id, day):
        assert time.monotonic() < deadline, "compute staged no slice within 600 s"
        time.sleep(0.05)
    if kill:
        component.process.kill()
    else:
        component.stop()
    time.sleep(20)
    component.start()
    after()
    return client.wait_for_run(DAG_ID, run_id, timeout=1500), tries(client, run_id)


@pytest.mark.chaos
def test_the_object_store_killed_during_a_batch_run_loses_and_duplicates_nothing(
    stack: Platform, client: AirflowClient, traffic: Manifest, figures: Figures
) -> None:
    """s3proxy SIGKILLed while a re-run of a published day stages its slices on S3, and
    started again 20 s later: the run succeeds (the S3 clients retry, or Airflow retries
    the task), the day's served rows are the same row for row, and every view equals the
    ground truth."""
    settings, day = stack.settings, DAYS[1]
    reference = view_rows(settings, [day])
    assert all(reference.values()), "the backfill test above publishes the day first"
    # the streams may fail on the outage (their supervisor DAG runs every 10 min here):
    # what the outage stopped is started again for the tests that follow
    state, tried = run_through_an_outage(stack, client, day, stack.object_store, kill=True,
                                         after=lambda: stack.up(echo=lambda line: None))
    assert state == "success", tried
    assert view_rows(settings, [day]) == reference
    assert differences_from_the_truth(settings, [traffic]) == dict.fromkeys(load_views(), 0)
    figures(outage_seconds=20, tries=tried, views_equal_to_the_truth=len(load_views()))


@pytest.mark.chaos
def test_postgresql_stopped_during_a_batch_run_loses_and_duplicates_nothing(
    stack: Platform, client: AirflowClient, traffic: Manifest, figures: Figures
) -> None:
    """Airflow's database stopped while a re-run of a published day computes, and started
    again 20 s later: Airflow's scheduler, dag-processor and triggerer exit without their
    database, and the stack's watchdog starts them again by itself; the run succeeds, the
    day's served rows are the same row for row, and every view equals the ground truth."""
    settings, day = stack.settings, DAYS[1]
    reference = view_rows(settings, [day])
    pids = {p.name: p.pid() for p in stack.airflow.processes}

    def airflow_back() -> None:
        deadline = time.monotonic() + 240
        while any(p.pid() is None for p in stack.airflow.processes) or (
                stack.airflow.unhealthy_components()):
            assert time.monotonic() < deadline, "the watchdog did not start Airflow again"
            time.sleep(2)

    state, tried = run_through_an_outage(stack, client, day, stack.postgres, kill=False,
                                         after=airflow_back)
    assert state == "success", tried
    assert view_rows(settings, [day]) == reference
    assert differences_from_the_truth(settings, [traffic]) == dict.fromkeys(load_views(), 0)
    restarted = sorted(p.name for p in stack.airflow.processes if p.pid() != pids[p.name])
    figures(outage_seconds=20, tries=tried, airflow_processes_started_again=restarted)


def late_traffic(settings: Settings, counted: Manifest, day: date, seed: int) -> Manifest:
    """Events of ``day`` produced days after it was published, duplicates among them, then
    copies of 50 of the day's events already counted (from ``counted``)."""
    manifest = produce(settings, TrafficProfile(
        count=800, seed=seed, start_time=midnight(day) + timedelta(hours=1),
        event_time_rate=800 / (20 * 3600), late_fraction=0, duplicate_fraction=0.1,
        malformed_fraction=0, users=300, pages=10, products=20))
    producer = EventProducer(settings.kafka, settings.kafka.events_topic.name)
    copies = [record for record in manifest_records(counted) if record.kind == "valid"
              and str(record.event["occurred_at"]).startswith(str(day))][:50]
    assert len(copies) == 50
    for record in copies:
        producer.send(record.key, record.value)
    assert producer.flush() == 0
    wait_caught_up(settings)
    return manifest


@pytest.fixture(scope="module")
def late_first_day(stack: Platform, traffic: Manifest) -> Manifest:
    """Late events of DAYS[0], in bronze after the day was published."""
    return late_traffic(stack.settings, traffic, DAYS[0], seed=406)


def marks_of(settings: Settings) -> dict[str, datetime]:
    """Every view's high-water mark, from the publication log."""
    marks = high_water_marks(settings)
    return {name: marks.of(name) for name in load_views()}


def late_rows_waiting(settings: Settings) -> dict[str, int]:
    """Per view, the late rows ``GET /freshness`` reports waiting."""
    fresh = httpx.get(f"{settings.serving.base_url}/freshness", timeout=30).json()
    return {name: view["late_rows_waiting"] for name, view in fresh.items()}


def wait_until_restated(settings: Settings, client: AirflowClient, day: date,
                        timeout: float = 1200, failed: frozenset[str] | set[str] = frozenset()
                        ) -> list[dict[str, Any]]:
    """Resume the restatement DAG and wait until no late row waits and no restatement run
    is active; pause it again; the restatements logged for ``day``. Every restatement run
    succeeded, but those ``failed`` names."""
    client.unpause(RESTATEMENT_DAG_ID)
    deadline = time.monotonic() + timeout
    try:
        while any(late_rows_waiting(settings).values()) or any(
                run["dag_run_id"].startswith("restate__") for run in client.active_runs(DAG_ID)):
            assert time.monotonic() < deadline, (
                f"late rows still wait after {timeout:.0f} s: {late_rows_waiting(settings)}")
            time.sleep(10)
    finally:
        client.pause(RESTATEMENT_DAG_ID)
    runs = [r for r in client.dag_runs(DAG_ID) if r["dag_run_id"].startswith("restate__")]
    assert runs and all(r["state"] == ("failed" if r["dag_run_id"] in failed else "success")
                        for r in runs), runs
    return [r for r in read_restatements(settings) if r["interval_start"].date() == day]


def api_totals(settings: Settings, day: date) -> dict[str, Decimal]:
    """Each view's first measure summed over ``day`` as the query API answers it."""
    totals = {}
    for name, view in load_views().items():
        rows, _ = merged_answer(settings.serving.base_url, name, midnight(day),
                                midnight(day + timedelta(days=1)))
        totals[name] = sum((Decimal(str(row[view.measures[0].name])) for row in rows),
                           Decimal(0))
    return totals


def truth_totals(manifests: list[Manifest], day: date) -> dict[str, Decimal]:
    events = pd.concat([manifest_events(manifest) for manifest in manifests])
    changes = reference_changes(manifests)
    return {name: sum((Decimal(str(v)) for v in expected_view(
                with_attributes_as_of_event_time(events, view, changes), view, midnight(day),
                midnight(day + timedelta(days=1)))[view.measures[0].name]), Decimal(0))
            for name, view in load_views().items()}


def test_events_days_late_are_restated_without_a_manual_command(
    stack: Platform, client: AirflowClient, traffic: Manifest, late_first_day: Manifest
) -> None:
    """Events of the first backfilled day arrive days late, with duplicates among them and
    copies of events already counted. /freshness reports them waiting; DAG
    lambdalake_restatement restates the day through a batch run; every view's answer then
    equals the ground truth, the waiting counts are zero, the high-water mark stays, and
    every answer read meanwhile was the one before or the one after, never a mix."""
    settings, day, late = stack.settings, DAYS[0], late_first_day
    before, after = truth_totals([traffic], day), truth_totals([traffic, late], day)
    assert after != before
    assert api_totals(settings, day) == before  # the late events are in no answer yet
    marks = marks_of(settings)
    waiting = {w.view: w.rows for w in LateArrivals(settings, list(load_views().values()))
               .waiting()}
    assert all(waiting.values()), waiting
    deadline = time.monotonic() + 120  # /freshness looks every serving.late_rows_look_seconds
    while late_rows_waiting(settings) != waiting:
        assert time.monotonic() < deadline, (late_rows_waiting(settings), waiting)
        time.sleep(5)

    stop = threading.Event()

    def read_in_a_loop() -> list[dict[str, Decimal]]:
        seen = []
        while not stop.is_set():
            seen.append(api_totals(settings, day))
            time.sleep(1)
        return seen

    reader = Background(read_in_a_loop, "reader")
    try:
        restated = wait_until_restated(settings, client, day)
    finally:
        stop.set()
    seen = reader.result(timeout=120)
    assert differences_from_the_truth(settings, [traffic, late]) == dict.fromkeys(load_views(), 0)
    assert api_totals(settings, day) == after
    mixed = [totals for totals in seen
             if any(totals[name] not in (before[name], after[name]) for name in totals)]
    assert mixed == [], f"{len(mixed)} of {len(seen)} answers were neither before nor after"
    assert late_rows_waiting(settings) == dict.fromkeys(load_views(), 0)
    assert marks_of(settings) == marks
    assert {r["view"]: r["late_rows"] for r in restated} == waiting
    announced_restatements(stack, restated, day)
    status, freshness, quality = blocks(TUTORIAL, "bash")[2].splitlines()  # watching it
    shown = run_shell_block(status)  # the newest restatements, each with its run
    assert any(f"late rows taken in, run {r['run_id']}" in shown for r in restated), shown
    answered = json.loads(run_shell_block(edited(
        freshness, {"http://127.0.0.1:8000": settings.serving.base_url})))
    assert {name: view["late_rows_waiting"] for name, view in answered.items()} == (
        dict.fromkeys(load_views(), 0))
    assert run_shell_block(quality).startswith("recorded (UTC)")  # its warnings, if any
    print(f"restated {day}: {waiting} late rows waited; {len(seen)} answers read meanwhile, "
          f"each before or after; runs {sorted({r['run_id'] for r in restated})}")


def announced_restatements(stack: Platform, restated: list[dict[str, Any]], day: date) -> None:
    """Each run that restated ``day`` announced each view it restated, and no other, on the
    view's asset: the day's interval, marked a restatement."""
    announced: set[str] = set()
    for run_id in {r["run_id"] for r in restated}:
        events = view_asset_events(stack, run_id)
        assert {view: [(e["start"], e["end"], e["restatement"]) for e in extras]
                for view, extras in events.items()} == {
            r["view"]: [(*map(iso_utc, day_interval(day)), True)]
            for r in restated if r["run_id"] == run_id}, (run_id, events)
        announced |= set(events)
    assert announced == {r["view"] for r in restated}


def snapshot_totals(path: str) -> set[int]:
    """page_traffic's total views at every committed version of one physical table."""
    table = DeltaTable(path)
    totals = set()
    for version in range(table.version() + 1):
        table.load_as_version(version)
        totals.add(sum(table.to_pyarrow_table(columns=["views"]).column("views").to_pylist()))
    return totals


def test_a_full_reprocess_switches_readers_while_ingest_writes(
    stack: Platform, client: AirflowClient, traffic: Manifest, late_first_day: Manifest
) -> None:
    """Late events of a published day arrive; then a full reprocess runs while more arrive:
    readers see the old version, then the new one, never a mix; the new version equals the
    ground truth of every event bronze held when the reprocess read it. Then the
    restatement DAG restates what is still late, in the version readers now use, and every
    view equals the ground truth of every event."""
    settings = stack.settings
    late = late_traffic(settings, traffic, DAYS[1], seed=407)
    views = load_views()
    waiting = LateArrivals(settings, list(views.values())).waiting()
    # a hopping window from the day before reaches into the day
    assert all(w.windows and w.oldest and midnight(DAYS[1]) - timedelta(
        seconds=views[w.view].reach_seconds) <= w.oldest < midnight(DAYS[2])
        for w in waiting), waiting
    old = current_version(settings, "page_traffic")
    stop = threading.Event()

    def read_in_a_loop() -> list[tuple[str, int]]:
        seen: list[tuple[str, int]] = []
        while not stop.is_set():
            path = current_table_path(settings, "page_traffic")
            if DeltaTable.is_deltatable(path):  # run alone, the first version may not exist yet
                rows = DeltaTable(path).to_pyarrow_table(columns=["views"])
                seen.append((path, sum(rows.column("views").to_pylist())))
            time.sleep(0.2)
        return seen

    writer = Background(lambda: produce(settings, TrafficProfile(
        count=30_000, rate=500, seed=405, start_time=midnight(DAYS[1]) + timedelta(hours=5),
        event_time_rate=1.0)), "writer")  # new events for the second backfilled day, while it runs
    reader = Background(read_in_a_loop, "reader")
    try:
        run_id = client.trigger(DAG_ID, {"full_reprocess": True, "views": ["page_traffic"]})
        assert client.wait_for_run(DAG_ID, run_id, timeout=1200) == "success"
        assert client.task_states(DAG_ID, run_id) == {
            "plan": "success", "wait_for_bronze": "success", "gate_bronze": "success",
            "compute": "success", "gate_views": "success", "publish": "success"}
    finally:
        stop.set()
    seen = reader.result(timeout=60)
    written = writer.result(timeout=120)
    wait_caught_up(settings)  # what is still late is in bronze before it is restated
    assert current_version(settings, "page_traffic") == old + 1
    old_path, new_path = (settings.table_path(physical_table("page_traffic", v))
                          for v in (old, old + 1))
    assert {path for path, _ in seen} == {old_path, new_path}  # readers saw both, in order
    assert [path for path, _ in seen] == sorted((p for p, _ in seen), key=[old_path, new_path].index)
    committed = {old_path: snapshot_totals(old_path), new_path: snapshot_totals(new_path)}
    assert all(total in committed[path] for path, total in seen)  # never a mix
    assert DeltaTable(old_path).version() >= 0  # the old version is kept
    settled = [traffic, late_first_day, late]
    assert differences_from_the_truth(settings, settled, written, ["page_traffic"]) == {
        "page_traffic": 0}

    restated = wait_until_restated(settings, client, DAYS[1])
    assert {r["view"] for r in restated} >= set(load_views()) - {"page_traffic"}
    assert current_version(settings, "page_traffic") == old + 1
    assert differences_from_the_truth(settings, [*settled, written]) == dict.fromkeys(
        load_views(), 0)
    print(f"after the switch to v{old + 1}, restated {DAYS[1]}: "
          + ", ".join(f"{r['view']} {r['late_rows']} late rows" for r in restated))


def airflow_auth(stack: Platform, user: str | None = None, password: str | None = None
                 ) -> dict[str, str]:
    """A bearer token for Airflow's REST API and its plugin pages: the admin's, or
    ``user``'s."""
    settings = stack.settings
    token = httpx.post(f"{settings.airflow.base_url}/auth/token", timeout=30, json={
        "username": user or settings.airflow.admin_user,
        "password": password or stack.airflow.admin_password,
    }).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def test_the_trigger_account_reads_runs_and_changes_no_pool_variable_or_connection(
    stack: Platform, client: AirflowClient
) -> None:
    """The restatement DAG triggers runs as this account (the restatement tests above show
    it can), and so does `lambdalake recompute`, run as *Backfill and restate* writes it (one
    run, one view, its interval; the view's rows as they were); Airflow refuses the account
    everything an admin could change."""
    settings = stack.settings
    auth = airflow_auth(stack, settings.airflow.trigger_user, stack.airflow.trigger_password)
    api = f"{settings.airflow.base_url}/api/v2"
    runs = httpx.get(f"{api}/dags/{DAG_ID}/dagRuns", headers=auth, timeout=30)
    assert runs.status_code == 200 and "dag_runs" in runs.json(), runs.text[:500]
    pool = settings.airflow.spark_pool
    refused = [
        httpx.patch(f"{api}/pools/{pool}", params={"update_mask": "slots"}, headers=auth,
                    json={"pool": pool, "slots": 0, "include_deferred": False}, timeout=30),
        httpx.post(f"{api}/variables", headers=auth, json={"key": "k", "value": "v"},
                   timeout=30),
        httpx.post(f"{api}/connections", headers=auth,
                   json={"connection_id": "c", "conn_type": "http"}, timeout=30),
    ]
    assert [r.status_code for r in refused] == [403, 403, 403], [r.text[:200] for r in refused]

    day = DAYS[0]  # the tutorial's one run over an interval, for one view: this account's
    funnel = view_rows(settings, [day])["funnel"]
    start, end = day_interval(day)
    run_id = triggered_run_id(run_shell_block(redated(blocks(TUTORIAL, "bash")[1], start, end)))
    assert client.wait_for_run(DAG_ID, run_id) == "success"
    run = client.dag_run(DAG_ID, run_id)
    assert (run["conf"]["views"], datetime.fromisoformat(run["data_interval_start"]),
            datetime.fromisoformat(run["data_interval_end"]), run["triggering_user_name"]) == (
        ["funnel"], start, end, settings.airflow.trigger_user), run
    assert set(view_asset_events(stack, run_id)) == {"funnel"}
    assert view_rows(settings, [day])["funnel"] == funnel


def set_spark_pool(settings: Settings, auth: dict[str, str], slots: int) -> None:
    """Resize the pool every Spark task runs in (Airflow's REST API: at once, where its CLI
    takes seconds to start): at 0, a task waiting for a slot stays waiting while running
    ones go on."""
    pool = settings.airflow.spark_pool
    response = httpx.patch(f"{settings.airflow.base_url}/api/v2/pools/{pool}",
                           params={"update_mask": "slots"}, headers=auth, timeout=30,
                           json={"pool": pool, "slots": slots, "include_deferred": False})
    assert response.status_code == 200, response.text


def wait_for_task(client: AirflowClient, run_id: str, task: str, states: set[str],
                  timeout: float = 900) -> str:
    deadline = time.monotonic() + timeout
    while (state := client.task_states(DAG_ID, run_id).get(task)) not in states:
        assert time.monotonic() < deadline, f"{task} of {run_id} still {state}"
        time.sleep(0.1)
    return state


def break_its_staged_slice(stack: Platform, client: AirflowClient, run_id: str, day: date,
                           read: Callable[[], Any]) -> list[Any]:
    """Hold the run's ``gate_views`` (the Spark pool emptied while ``compute`` runs); negate
    page_traffic's counts in the run's staged slice of ``day``, as a buggy computation
    would; then let the gate go on. What ``read`` answered while the slice was staged,
    before and after it was broken."""
    settings = stack.settings
    auth = airflow_auth(stack)  # ready before compute starts: it runs for a few seconds
    assert wait_for_task(client, run_id, "compute", {"running", "success", "failed"}) == "running"
    set_spark_pool(settings, auth, 0)
    try:
        assert wait_for_task(client, run_id, "compute", {"success", "failed"}) == "success"
        time.sleep(5)  # had the gate taken a slot, it would be running by now
        assert client.task_states(DAG_ID, run_id)["gate_views"] not in {"running", "success"}
        assert views_staged(settings, run_id, day) == sorted(load_views())
        during = [read()]
        DeltaTable(delta_rs_uri(staging_path(
            settings, "page_traffic", run_id, midnight(day), midnight(day + timedelta(days=1))
        ))).update({"views": "-views"})
        during.append(read())
    finally:
        set_spark_pool(settings, auth, settings.airflow.spark_pool_slots)
    return during


def failed_at_gate_views(client: AirflowClient, run_id: str) -> None:
    assert client.wait_for_run(DAG_ID, run_id, timeout=900) == "failed"
    states = client.task_states(DAG_ID, run_id)
    assert (states["gate_views"], states["publish"]) == ("failed", "upstream_failed"), states
    assert client.task_instance(DAG_ID, run_id, "gate_views")["try_number"] == 1


def shown_interval(client: AirflowClient, run_id: str) -> tuple[datetime, datetime]:
    """The data interval the run's page shows."""
    run = client.dag_run(DAG_ID, run_id)
    return (datetime.fromisoformat(run["data_interval_start"]),
            datetime.fromisoformat(run["data_interval_end"]))


def restatement_run(client: AirflowClient, day: date, timeout: float = 600) -> str:
    """The restatement run of ``day`` the restatement DAG (unpaused) triggers next."""
    deadline = time.monotonic() + timeout
    while True:
        runs = [run["dag_run_id"] for run in client.active_runs(DAG_ID)
                if run["dag_run_id"].startswith(f"restate__{day}T00:00:00Z")]
        if runs:
            return str(runs[0])
        assert time.monotonic() < deadline, f"no restatement of {day} within {timeout:.0f} s"
        time.sleep(1)


def test_runs_whose_view_gate_fails_leave_what_readers_see_and_the_late_rows_waiting(
    stack: Platform, client: AirflowClient, traffic: Manifest
) -> None:
    """Late events of a published day arrive. A re-run of the day, then the restatement
    DAG's run of it, each compute a slice that breaks a bound (injected into the run's
    staging): the API's answers for the day are the same before, while the broken slice is
    staged, and after each run failed at gate_views; the failure is on the run's Data
    quality page; the late rows still wait; a later run triggered from the UI's form with its
    defaults (Chromium) computes the last whole day and publishes nothing of it; the
    Pipeline status page shows the rows waiting; the restatement DAG tries the day again
    after its retry pause, every answer then equals the ground truth of every event, and
    the page shows none waiting, each view's last batch verdict passed, and its charts."""
    settings, day = stack.settings, DAYS[2]
    before = truth_totals([traffic], day)
    assert api_totals(settings, day) == before
    late = late_traffic(settings, traffic, day, seed=408)
    views = list(load_views().values())
    waiting = {w.view: w.rows for w in LateArrivals(settings, views).waiting()}
    assert all(waiting.values()), waiting
    served = view_rows(settings, [day])

    def answers_unchanged() -> None:
        assert api_totals(settings, day) == before and view_rows(settings, [day]) == served
        assert {w.view: w.rows for w in LateArrivals(settings, views).waiting()} == waiting

    rerun = client.trigger(DAG_ID, interval=day_interval(day))
    assert shown_interval(client, rerun) == day_interval(day)
    during = break_its_staged_slice(stack, client, rerun, day, lambda: api_totals(settings, day))
    failed_at_gate_views(client, rerun)
    assert during == [before, before]
    answers_unchanged()
    quality = httpx.get(f"{settings.airflow.base_url}/lambdalake-quality/runs/{DAG_ID}/{rerun}",
                        headers=airflow_auth(stack), timeout=30)
    assert quality.status_code == 200 and "range:views" in quality.text, quality.text[-2000:]

    other = datetime.now(UTC).date() - timedelta(days=1)  # the form's default: the last whole day
    with fenced_page(is_loopback_url, viewport={"width": 1400, "height": 1000}) as (page,
                                                                                    refused):
        log_in(page, stack)
        other_run = trigger_with_the_forms_defaults(page, stack, DAG_ID, "trigger-form.png")
    assert refused == []
    assert client.wait_for_run(DAG_ID, other_run, timeout=900) == "success"
    assert {view: [(e["start"], e["end"]) for e in announced] for view, announced
            in view_asset_events(stack, other_run).items()
            } == {view: [tuple(map(iso_utc, day_interval(other)))] for view in load_views()}
    answers_unchanged()

    client.unpause(RESTATEMENT_DAG_ID)
    try:
        restating = restatement_run(client, day)
        assert shown_interval(client, restating) == day_interval(day)
        shown = client.dag_run(DAG_ID, restating)
        assert shown["note"].startswith(f"Triggered by [{RESTATEMENT_DAG_ID} run "), shown
        cause = shown["note"].split(" run ", 1)[1].split("]", 1)[0]
        deadline = time.monotonic() + 60  # the cycle writes its own note once it triggered
        while f"](/dags/{DAG_ID}/runs/{quote(restating, safe='')})" not in (
                client.dag_run(RESTATEMENT_DAG_ID, cause).get("note") or ""):
            assert time.monotonic() < deadline, client.dag_run(RESTATEMENT_DAG_ID, cause)
            time.sleep(2)
        assert set(shown["conf"]["restating"]) == set(waiting), shown
        during = break_its_staged_slice(stack, client, restating, day,
                                        lambda: api_totals(settings, day))
        failed_at_gate_views(client, restating)
    finally:
        client.pause(RESTATEMENT_DAG_ID)
    assert during == [before, before]
    answers_unchanged()
    assert not [r for r in read_restatements(settings) if r["run_id"] == restating]
    rows, _ = shown_on_the_pipeline_status_page(stack, "pipeline-status-rows-waiting.png")
    assert {view: cells[7] for view, cells in rows.items()} == {  # "rows waiting"
        view: f"{waiting[view]:,}" if view in waiting else "–" for view in load_views()}

    restated = wait_until_restated(settings, client, day, failed={restating})
    assert {r["view"]: r["late_rows"] for r in restated} == waiting
    assert view_asset_events(stack, restating) == {}  # what failed its gate announced nothing
    announced_restatements(stack, restated, day)
    assert restating not in {r["run_id"] for r in restated}
    assert api_totals(settings, day) == truth_totals([traffic, late], day) != before
    rows, charts = shown_on_the_pipeline_status_page(stack, "pipeline-status-restated.png")
    fresh = late_rows_waiting(settings)  # none waits: the page says what /freshness says
    assert not any(fresh.values()) and {view: cells[7] for view, cells in rows.items()} == {
        view: "–" if rows_waiting is None else f"{rows_waiting:,}"
        for view, rows_waiting in fresh.items()}
    assert {view: cells[8].split(",")[0] for view, cells in rows.items()} == dict.fromkeys(
        load_views(), "passed")  # each view's newest interval's batch verdict
    assert all(charts.get(title, 0) >= 1 for title in (
        "Batch freshness", "Stream lag", "Gate durations", "DAG run durations")), charts
    print(f"{rerun} and {restating} failed at gate_views; answers stayed {before}; "
          f"{waiting} late rows waited, restated by {sorted({r['run_id'] for r in restated})}")


def shown_on_the_pipeline_status_page(stack: Platform, screenshot: str
                                      ) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Each view's row of the Pipeline status page and its charts' lines, in Chromium with
    nothing beyond loopback."""
    with fenced_page(is_loopback_url, viewport={"width": 1400, "height": 900}) as (page,
                                                                                   refused):
        log_in(page, stack)
        shown = pipeline_status(page, stack, screenshot)
    assert refused == [], refused
    return shown


BAD_DAY = TODAY - timedelta(days=6)  # no scheduled or backfilled run covers it


def inject_bad_batch(settings: Settings) -> list[str]:
    """Append a day of bronze rows the way a buggy writer bypassing ingest would: copies of
    DAYS[0]'s events moved to BAD_DAY, three purchases with a negative amount and two rows
    written twice (same Kafka coordinates). Returns the event ids of the bad rows."""
    from decimal import Decimal

    import pyarrow as pa
    from deltalake import write_deltalake

    path = settings.table_path(BRONZE_TABLE)
    source = DeltaTable(path).to_pyarrow_table(
        filters=[("event_date", "=", DAYS[0])]).slice(0, 300)
    shift = DAYS[0] - BAD_DAY
    rows = source.to_pylist()
    for number, row in enumerate(rows):
        row.update(event_id=f"injected-{number}", occurred_at=row["occurred_at"] - shift,
                   event_date=BAD_DAY, offset=10**12 + number)
    purchases = [row for row in rows if row["event_type"] == "purchase"][:3]
    assert len(purchases) == 3, "the source day should have purchases"
    for row in purchases:
        row["amount"] = Decimal("-5.00")
    twice = [dict(row, event_id=f"injected-again-{n}") for n, row in enumerate(rows[-2:])]
    write_deltalake(path, pa.Table.from_pylist(rows + twice, schema=source.schema),
                    mode="append")
    return [row["event_id"] for row in purchases + twice]


def test_an_injected_bad_batch_stops_at_the_gate_until_the_data_is_fixed(
    stack: Platform, client: AirflowClient
) -> None:
    settings = stack.settings
    bad_ids = inject_bad_batch(settings)
    failed_run = client.trigger(DAG_ID, interval=day_interval(BAD_DAY))
    assert client.wait_for_run(DAG_ID, failed_run, timeout=900) == "failed"
    states = client.task_states(DAG_ID, failed_run)
    assert states["gate_bronze"] == "failed", states
    assert {states[t] for t in ("compute", "gate_views", "publish")} == {"upstream_failed"}
    # data failing a gate fails its task at once: a retry would read the same data
    assert client.task_instance(DAG_ID, failed_run, "gate_bronze")["try_number"] == 1
    for name in load_views():
        assert midnight(BAD_DAY) not in {s for s, _ in published_intervals(settings, name)}
    report = subprocess.run(
        [str(Path(sys.executable).parent / "lambdalake"), "quality", "--failed",
         "--layer", "bronze", "--format", "json"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **STACK_ENV})
    assert report.returncode == 0, report.stderr
    gate = next(r for r in json.loads(report.stdout) if r.get("run_id") == failed_run)
    failures = {f["check"]: f for f in gate["critical_failures"]}
    assert "range:amount" in failures and "unique:topic,partition,offset" in failures, failures
    assert -5 in [float(v) for v in failures["range:amount"]["samples"]]
    assert failures["unique:topic,partition,offset"]["unexpected_count"] == 4  # 2 rows, twice

    DeltaTable(settings.table_path(BRONZE_TABLE)).delete(
        f"event_date = '{BAD_DAY}' AND event_id IN ("
        + ", ".join(f"'{event_id}'" for event_id in bad_ids) + ")")
    fixed_run = client.trigger(DAG_ID, interval=day_interval(BAD_DAY))
    assert client.wait_for_run(DAG_ID, fixed_run, timeout=900) == "success"
    assert set(client.task_states(DAG_ID, fixed_run).values()) == {"success"}
    for name in load_views():
        assert midnight(BAD_DAY) in {s for s, _ in published_intervals(settings, name)}
    print(f"bad batch: run {failed_run} stopped at gate_bronze with {sorted(failures)}; "
          f"after the fix run {fixed_run} published {BAD_DAY}")


def task_process(code: str) -> subprocess.Popen[str]:
    """A Python process like a batch task's, with the stack's settings, running ``code``."""
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **STACK_ENV})


def test_two_tasks_sessions_on_the_connect_server_never_see_each_other(stack: Platform) -> None:
    """Temporary views and SQL settings belong to a task's own session."""
    process = task_process("""
import json
from lambdalake.spark import task_session
with task_session("a") as a, task_session("b") as b:
    a.range(3).createOrReplaceTempView("only_in_a")
    a.conf.set("spark.sql.shuffle.partitions", "7")
    print(json.dumps({"a_rows": a.table("only_in_a").count(),
                      "b_sees_it": b.catalog.tableExists("only_in_a"),
                      "a_partitions": a.conf.get("spark.sql.shuffle.partitions"),
                      "b_partitions": b.conf.get("spark.sql.shuffle.partitions"),
                      "b_time_zone": b.conf.get("spark.sql.session.timeZone")}))
""")
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    seen = json.loads(output.strip().splitlines()[-1])
    assert seen == {"a_rows": 3, "b_sees_it": False, "a_partitions": "7",
                    "b_partitions": str(stack.settings.spark.shuffle_partitions),
                    "b_time_zone": "UTC"}


def test_the_connect_server_refuses_a_client_without_its_token(stack: Platform) -> None:
    """Any local user can reach the port; only a client with the stack's token gets a
    session (the tasks above had one)."""
    process = task_process(f"""
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote("sc://localhost:{stack.settings.spark.connect_port}").create()
try:
    print(spark.range(3).count())
except Exception as error:
    print("refused:", type(error).__name__, " ".join(str(error).split())[:300])
""")
    output, _ = process.communicate(timeout=120)
    last = output.strip().splitlines()[-1]
    assert last.startswith("refused:") and "UNAUTHENTICATED" in last.upper(), output[-3000:]


def test_a_dead_connect_server_fails_its_task_clearly_and_a_restart_serves_the_next(
    stack: Platform, client: AirflowClient,
) -> None:
    """SIGKILL the server under a running query: the task fails within the client's retry
    budget, naming the lost server; a task starting meanwhile waits; the supervisor's start
    (what DAG lambdalake_speed_supervisor runs) brings the server back and that task runs.
    The supervisor DAG itself is paused meanwhile: its scheduled run would start the server
    again at a moment of its own (it once did within the 5 s a task is seen waiting)."""
    client.pause(SUPERVISOR_DAG_ID)
    try:
        wait_for_no_run(client, SUPERVISOR_DAG_ID)
        kill_the_server_under_a_task_and_restart_it(stack)
    finally:
        client.unpause(SUPERVISOR_DAG_ID)


def wait_for_no_run(client: AirflowClient, dag_id: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while client.active_runs(dag_id):
        assert time.monotonic() < deadline, f"{dag_id} still has a run after {timeout:.0f}s"
        time.sleep(2)


def kill_the_server_under_a_task_and_restart_it(stack: Platform) -> None:
    running = task_process("""
from lambdalake.spark import task_session
with task_session("long") as spark:
    print("querying", flush=True)
    spark.range(10**12).selectExpr("sum(id % 7)").collect()
""")
    assert running.stdout is not None
    assert running.stdout.readline().strip() == "querying"
    time.sleep(3)
    stack.spark_connect.process.kill()
    killed = time.monotonic()
    output, _ = running.communicate(timeout=120)
    failed_after = time.monotonic() - killed
    assert running.returncode != 0
    assert "SparkConnectUnavailable: the Spark Connect server at" in output, output[-3000:]
    assert failed_after < 60

    waiting = task_process("""
from lambdalake.spark import task_session
with task_session("after") as spark:
    print(spark.range(5).count())
""")
    time.sleep(5)
    assert waiting.poll() is None, "a task must wait for the server, not fail at once"
    message = SparkConnectServer(stack.settings).start()
    assert message.startswith("Spark Connect server started"), message
    output, _ = waiting.communicate(timeout=300)
    assert waiting.returncode == 0 and output.strip().splitlines()[-1] == "5", output[-3000:]
    print(f"server killed under a query: the task failed {failed_after:.0f} s later; "
          f"{message}; the waiting task ran")
