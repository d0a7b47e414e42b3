"""The platform's main job (``make demo``): traffic through every layer to a merged answer.

1. Produce three hours of clickstream ending now — late events (within the views' lateness
   allowance, so every layer counts them), duplicates and malformed records of every kind —
   with the reference data the enriched views join (a catalogue of products and user
   profiles, then changes during those hours, on their compacted topics; the first run
   only), and reconcile
   bronze + quarantine with what was produced once ingest has caught up.
2. Wait until the speed layer has consumed it too.
3. Run the batch DAG through Airflow's REST API, one run over every hour since the
   schedule's first day whose lateness allowance has passed — every hour a scheduled run
   may already have published, so a re-run's traffic reaches all of them. The hours after
   it stay with the speed layer.
4. Wait until the query API serves the new high-water mark, then show queries whose
   answers merge batch rows (before the mark) with real-time rows (after it), one of them
   of a view enriched with reference data.

Safe to run again: each run produces new traffic (new event ids, so nothing is counted
twice); the batch run replaces the slices it computes, and the high-water mark only moves
forward. On a re-run, events older than the speed layer's watermark are dropped by the speed
layer as too late (and counted) — the batch layer's next run covers them, which is the
Lambda architecture's point.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import httpx

from lambdalake.generator.traffic import Manifest, TrafficProfile
from lambdalake.settings import Settings

BATCH_DAG = "lambdalake_batch_views"
TRAFFIC_HOURS = 3
PRODUCE_RATE = 5_000.0
REFERENCE_CHANGE_EVERY = 50  # records between reference changes


@dataclass(frozen=True)
class DemoPlan:
    """What one demo run produces and recomputes."""

    profile: TrafficProfile
    batch_start: datetime
    batch_end: datetime  # the high-water mark the demo waits for

    @property
    def query_start(self) -> datetime:
        return self.batch_end - timedelta(hours=2)

    @property
    def query_end(self) -> datetime:
        return hour_floor(datetime.now(UTC)) + timedelta(hours=1)


def hour_floor(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def plan_demo(settings: Settings, count: int, seed: int, now: datetime,
              with_reference: bool = True) -> DemoPlan:
    """Traffic over the past hours; a batch interval from the first day to the last hour whose
    windows have closed and whose lateness allowance has passed (the batch DAG's
    completeness wait is then already over).
    Lateness stays at 80% of the smallest allowance so the speed layer keeps it.
    ``with_reference``: the catalogue and its changes come too (on a platform without
    reference data yet; a later run's events join what the first one left, since sending
    the past hours' changes again would backdate them behind the first run's)."""
    from lambdalake.views.definition import load_views

    views = load_views().values()
    allowance = min(view.lateness_seconds for view in views)
    settled = hour_floor(now - timedelta(seconds=max(  # hopping windows close after it
        view.reach_seconds + view.lateness_seconds for view in views)))
    span = timedelta(hours=TRAFFIC_HOURS)
    profile = TrafficProfile(
        count=count, rate=PRODUCE_RATE, late_fraction=0.05,
        max_lateness_minutes=0.8 * allowance / 60, duplicate_fraction=0.02,
        malformed_fraction=0.02, seed=seed, start_time=now - span,
        event_time_rate=count / span.total_seconds(),
        reference_change_every=REFERENCE_CHANGE_EVERY if with_reference else 0,
    )
    first = datetime.combine(settings.batch.first_day, datetime.min.time(), tzinfo=UTC)
    return DemoPlan(profile, first, max(first, settled))


def produce_and_reconcile(settings: Settings, profile: TrafficProfile,
                          echo: Callable[[str], None]) -> Manifest:
    """Produce ``profile``, wait for ingest, check bronze + quarantine grew by what was sent."""
    from lambdalake.generator.traffic import produce_traffic
    from lambdalake.ingest.service import wait_caught_up
    from lambdalake.kafka.producer import EventProducer
    from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_TABLE
    from lambdalake.lake.delta_rs import row_count
    from lambdalake.operations.traffic import reference_producers, traffic_generator

    tables = (BRONZE_TABLE, QUARANTINE_TABLE)
    before = {table: row_count(settings.table_path(table)) for table in tables}
    producer = EventProducer(settings.kafka, settings.kafka.events_topic.name)
    manifest = produce_traffic(traffic_generator(settings, profile), producer,
                               reference=reference_producers(settings))
    path = settings.state_dir / "manifests" / f"demo-seed{profile.seed}.json"
    manifest.write(path)
    echo(f"produced {manifest.produced} {settings.kafka.events_format.upper()} records at "
         f"{profile.rate:,.0f}/s over "
         f"{TRAFFIC_HOURS} h of event time: {manifest.counts['valid']} valid, "
         f"{manifest.counts['duplicate']} duplicates, {manifest.malformed} malformed "
         f"(~{profile.late_fraction:.0%} late, up to {profile.max_lateness_minutes:.0f} min), "
         f"and {len(manifest.reference_changes)} reference changes; manifest {path}")
    if manifest.failed or manifest.acknowledged != manifest.produced:
        raise RuntimeError(f"the broker did not acknowledge {manifest.failed} records")
    wait_caught_up(settings, timeout=600)
    expected = {BRONZE_TABLE: manifest.counts["valid"] + manifest.counts["duplicate"],
                QUARANTINE_TABLE: manifest.malformed}
    landed = {table: row_count(settings.table_path(table)) - before[table] for table in tables}
    for table in tables:
        verdict = "ok" if landed[table] == expected[table] else f"EXPECTED +{expected[table]}"
        echo(f"  {table:<20} +{landed[table]} rows ({verdict})")
    if landed != expected:
        raise RuntimeError("bronze/quarantine do not reconcile with what was produced")
    return manifest


def run_batch(settings: Settings, plan: DemoPlan, echo: Callable[[str], None]) -> None:
    """One manual run of the batch DAG over the plan's interval, through the REST API (the
    interval is the run's data interval, shown on its page)."""
    from lambdalake.orchestration.airflow_api import admin_client

    client = admin_client(settings)
    client.wait_for_dag(BATCH_DAG)
    client.unpause(BATCH_DAG)  # from now on it also runs every closed hour on its own
    run_id = client.trigger(BATCH_DAG, interval=(plan.batch_start, plan.batch_end))
    echo(f"triggered {BATCH_DAG} for [{iso(plan.batch_start)}, {iso(plan.batch_end)}): run "
         f"{run_id}; waiting ...")
    state = client.wait_for_run(BATCH_DAG, run_id, timeout=1800)
    for task, task_state in client.task_states(BATCH_DAG, run_id).items():
        echo(f"  {task:<16} {task_state}")
    if state != "success":
        raise RuntimeError(
            f"{BATCH_DAG} run {state}: see {settings.airflow.base_url}/dags/{BATCH_DAG}")


def wait_for_mark(settings: Settings, mark: datetime, timeout: float = 120.0) -> dict[str, Any]:
    """The API's ``/freshness`` once every view's high-water mark reached ``mark``."""
    deadline = time.monotonic() + timeout
    while True:
        freshness = httpx.get(f"{settings.serving.base_url}/freshness", timeout=10,
                              headers=settings.serving.auth_headers()).json()
        marks = {view: fresh["high_water_mark"] for view, fresh in freshness.items()}
        if all(value and value >= iso(mark) for value in marks.values()):
            return dict(freshness)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the query API still serves high-water marks {marks}")
        time.sleep(1)


def example_queries(settings: Settings, plan: DemoPlan) -> list[str]:
    """Query URLs whose time range spans the high-water mark; the last one of a view
    enriched with reference data."""
    span = {"from": iso(plan.query_start), "to": iso(plan.query_end)}
    base = settings.serving.base_url
    return [
        f"{base}/views/page_traffic/rows?{urlencode({**span, 'where': 'page=/page/1'})}",
        f"{base}/views/funnel/rows?{urlencode({**span, 'where': 'country=DE'})}",
        f"{base}/views/product_sales_by_category/rows?"
        f"{urlencode({**span, 'where': 'category=books'})}",
    ]


def show_answer(settings: Settings, url: str, echo: Callable[[str], None]) -> None:
    """Say how many rows of the answer came from each layer, and its first rows."""
    answer = httpx.get(url, timeout=10, headers=settings.serving.auth_headers()).json()
    rows = answer["rows"]
    sources = {source: sum(row["source"] == source for row in rows)
               for source in ("batch", "realtime")}
    token = ' -H "Authorization: Bearer $LAMBDALAKE_SERVING__API_TOKEN"' \
        if settings.serving.api_token else ""
    echo(f"  curl{token} '{url}'")
    echo(f"    {len(rows)} rows: {sources['batch']} from batch (before "
         f"{answer['snapshot']['high_water_mark']}), {sources['realtime']} real-time")
    for row in rows[:2] + rows[-2:] if len(rows) > 4 else rows:
        echo(f"    {json.dumps(row)}")


def quality_summary(settings: Settings, echo: Callable[[str], None]) -> None:
    """The gate results recorded so far (``report.summary``), indented (blank lines kept
    blank)."""
    from lambdalake.quality.history import read_results, results_path
    from lambdalake.quality.page import write_report
    from lambdalake.quality.report import summary

    echo("\n".join(f"  {line}" if line else "" for line in summary(read_results(settings))))
    echo(f"  all of them: lambdalake quality (history in {results_path(settings)})")
    echo(f"  report with Data Docs: {write_report(settings)}")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_demo(settings: Settings, count: int, seed: int | None,
             echo: Callable[[str], None]) -> DemoPlan:
    """The whole main job on a running stack (``lambdalake up``), each step told to ``echo``
    as it ends (``lambdalake demo`` prints them); returns what it did."""
    from lambdalake.ingest.completeness import entity_topics
    from lambdalake.speed.service import wait_speed_caught_up
    from lambdalake.stack.airflow import ADMIN_PASSWORD
    from lambdalake.stack.secrets import secrets_dir
    from lambdalake.streaming.service import topic_end_offsets

    has_reference = any(topic_end_offsets(settings, topics=entity_topics(settings)).values())
    plan = plan_demo(settings, count, int(time.time()) if seed is None else seed,
                     datetime.now(UTC), with_reference=not has_reference)
    produce_and_reconcile(settings, plan.profile, echo)
    wait_speed_caught_up(settings, timeout=600)
    echo("speed layer caught up")
    run_batch(settings, plan, echo)
    wait_for_mark(settings, plan.batch_end)
    echo(f"\nquery API {settings.serving.base_url} (OpenAPI: "
         f"{settings.serving.base_url}/docs), batch before {iso(plan.batch_end)}, "
         f"real-time after:")
    for url in example_queries(settings, plan):
        show_answer(settings, url, echo)
    echo("\ndata quality:")
    quality_summary(settings, echo)
    af = settings.airflow
    echo(f"\nAirflow UI {af.base_url}/dags/{BATCH_DAG} (login {af.admin_user}, password in "
         f"{secrets_dir(settings) / ADMIN_PASSWORD} in local dev)")
    echo("every layer's freshness: make status     the same queries: "
         ".venv/bin/lambdalake query page_traffic --where page=/page/1")
    return plan
