"""The whole local stack, as `make up` runs it: healthy, runs DAGs, and `down` leaves nothing.

This module brings up its own stack (own state dir and ports), so it never disturbs the
broker the rest of the session shares. Its lake and checkpoints are on object storage: the
stack's own S3-compatible server (s3proxy), so ingest, the speed layer, the batch DAG, the
query API and the serving DAG's maintenance all run against S3 here, while the rest of the
suite covers local paths.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pandas as pd
import psutil
import pytest
import yaml
from confluent_kafka import Producer
from deltalake import DeltaTable
from prometheus_client.parser import text_string_to_metric_families
from pyarrow.fs import FileSelector

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.generator.catalogue import REFERENCE_MALFORMED_KINDS
from lambdalake.generator.traffic import Manifest
from lambdalake.ingest.service import wait_caught_up
from lambdalake.kafka.producer import EventProducer
from lambdalake.kafka.schema_registry import (
    AvroEventCodec,
    register_contracts,
    registry_client,
)
from lambdalake.kafka.schema_registry import subject as registry_subject
from lambdalake.lake.bronze import BRONZE_TABLE, QUARANTINE_TABLE
from lambdalake.lake.delta_rs import delta_rs_uri, table_exists
from lambdalake.lake.reference import QUARANTINE_TABLE as REFERENCE_QUARANTINE_TABLE
from lambdalake.operations.platform import Platform
from lambdalake.operations.restatement import BATCH_DAG_ID
from lambdalake.orchestration.airflow_api import AirflowClient, admin_client
from lambdalake.quality.history import read_results
from lambdalake.quality.report import recent, verdict
from lambdalake.settings import Settings, isolated_environment
from lambdalake.speed.reference_state import entry_hash
from lambdalake.speed.shards import APP as SPEED_APP
from lambdalake.stack.airflow import airflow_executable
from lambdalake.stack.process import ManagedProcess, StackError
from lambdalake.stack.secrets import secrets_dir
from lambdalake.streaming.progress import read_status
from lambdalake.views.definition import load_views
from tests.support.airflow_ui import pipeline_status
from tests.support.browser import (
    CHROMIUM,
    SCREENSHOTS,
    fenced_page,
    is_loopback,
    is_loopback_url,
    log_in,
)
from tests.support.contracts import contracts_with_page_view_v2
from tests.support.figures import Figures
from tests.support.ground_truth import (
    bounds_as_of_processing,
    expected_view,
    first_copies,
    manifest_events,
    totals_over_joins,
)
from tests.support.merged_answers import (
    bounded_disagreements,
    disagreements,
    merged_answer,
    sql_answer,
    window,
)
from tests.support.parquet_storage import (
    WRITTEN_AS_INGEST_WRITES,
    file_storage,
    files_committed,
)
from tests.support.reference_topics import (
    compacting_now,
    latest_good_values,
    poison_changes,
    records_in,
)
from tests.support.reference_truth import (
    processing_time_candidates,
    with_attributes_as_of_event_time,
)
from tests.support.tutorials import (
    blocks,
    edited,
    project_copy,
    redated,
    run_shell_block,
    triggered_run_id,
)

STACK_ENV = {**isolated_environment("test-platform", slot=2),
             "LAMBDALAKE_SPARK__BATCH_TASKS": "connect",  # as `make up` runs it
             # the lake and every checkpoint on the stack's S3-compatible server (s3proxy)
             "LAMBDALAKE_LAKE__OBJECT_STORE__SERVE": "true",
             # small segments, so the log cleaner has closed ones to compact
             "LAMBDALAKE_KAFKA__REFERENCE_TOPIC__SEGMENT_MS": "500",
             # the demo's whole range of every view in one SQL answer
             "LAMBDALAKE_SERVING__SQL_MAX_ROWS": "100000"}


@pytest.fixture(scope="module")
def platform(fresh_platform: Callable[[dict[str, str]], AbstractContextManager[Platform]],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """The stack, its project dir a copy of the checkout's (the tutorials' test adds files)."""
    project = project_copy(tmp_path_factory.mktemp("project"))
    with fresh_platform({**STACK_ENV, "LAMBDALAKE_PROJECT_DIR": str(project)}) as stack:
        yield stack


def speed_process(platform: Platform) -> ManagedProcess:
    """The platform's speed layer process: it runs one shard here."""
    (process,) = platform.speed.processes
    return process


def stack_processes(settings: Settings) -> list[psutil.Process]:
    """Every process on this machine that belongs to the stack's state dir."""
    found = []
    marker = str(settings.state_dir)
    for process in psutil.process_iter(["cmdline", "cwd", "environ"]):
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
            state_dir = (process.info["environ"] or {}).get("LAMBDALAKE_STATE_DIR", "")
            if marker in cmdline or marker in (process.info["cwd"] or "") or state_dir == marker:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_up_is_healthy_and_idempotent(platform: Platform) -> None:
    assert all(status.running for status in platform.status())
    assert {s.name for s in platform.status()} >= {"postgres", "kafka-1", "spark-connect", "ingest", "serving-api",
                                                    "airflow-scheduler", "airflow-api-server"}
    assert platform.airflow.unhealthy_components() == []
    assert platform.kafka.live_brokers() == 1
    assert platform.postgres.ready()
    pids = [s.pid for s in platform.status()]
    platform.up()  # a second `make up` starts nothing new
    assert [s.pid for s in platform.status()] == pids


def test_everything_listens_on_loopback_only(platform: Platform) -> None:
    pids = {p.pid for status in platform.status() for p in psutil.Process(status.pid).children(recursive=True)}
    pids |= {status.pid for status in platform.status()}
    listening = [
        c for c in psutil.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN and c.pid in pids
    ]
    assert listening, "the stack listens nowhere?"
    exposed = [(c.laddr.ip, c.laddr.port) for c in listening if not is_loopback(c.laddr.ip)]
    assert exposed == []


def test_airflow_dags_test_of_the_smoke_dag(platform: Platform) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [airflow_executable(), "dags", "test", "lambdalake_smoke"],
        env=platform.airflow.environment(), capture_output=True, text=True, timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "smoke: 1000 rows in Delta for 1000 Kafka records" in output
    assert "state=success" in output
    print(f"airflow dags test took {time.monotonic() - started:.1f}s")


def test_a_triggered_run_succeeds_through_the_scheduler(platform: Platform) -> None:
    settings = platform.settings
    client = AirflowClient(
        settings.airflow.base_url, settings.airflow.admin_user, platform.airflow.admin_password
    )
    client.wait_for_dag("lambdalake_smoke")
    client.unpause("lambdalake_smoke")
    run_id = client.trigger("lambdalake_smoke", {"events": 50})
    assert client.wait_for_run("lambdalake_smoke", run_id, timeout=600) == "success"
    assert client.task_states("lambdalake_smoke", run_id) == {
        "produce": "success", "kafka_to_delta": "success",
    }


@pytest.mark.chaos
def test_the_supervisor_dag_restarts_a_killed_speed_layer_and_ingest(platform: Platform) -> None:
    settings = platform.settings
    streams = [speed_process(platform), platform.ingest.process]
    killed = [process.pid() for process in streams]
    assert None not in killed, "`up` starts the speed layer and ingest"
    for process in streams:
        process.kill()
    client = AirflowClient(
        settings.airflow.base_url, settings.airflow.admin_user, platform.airflow.admin_password
    )
    dag_id = "lambdalake_speed_supervisor"
    client.wait_for_dag(dag_id)
    client.unpause(dag_id)  # active from creation; say so anyway
    run_id = client.trigger(dag_id, {})
    assert client.wait_for_run(dag_id, run_id, timeout=600) == "success"
    assert client.task_states(dag_id, run_id) == {
        "supervise": "success", "alert": "skipped", "gate_realtime": "success",
        "keep_ingest": "success", "keep_spark_connect": "success"}
    restarted = [process.pid() for process in streams]
    assert None not in restarted and not set(restarted) & set(killed), (killed, restarted)


def test_the_query_api_runs_with_the_stack(platform: Platform) -> None:
    base = platform.settings.serving.base_url
    assert httpx.get(f"{base}/health", timeout=10).status_code == 200
    assert "/views/{view}/rows" in httpx.get(f"{base}/openapi.json", timeout=10).json()["paths"]
    answer = httpx.get(f"{base}/views/page_traffic/rows", timeout=10)
    assert answer.status_code == 200 and "high_water_mark" in answer.json()["snapshot"]
    assert httpx.get(f"{base}/views/nope/rows", timeout=10).status_code == 404


def run_demo(platform: Platform, traffic: int, seed: int, events_format: str) -> str:
    """``lambdalake demo`` as the README runs it (after `make up`), its producers writing
    ``events_format``; its output."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lambdalake"), "demo", "--traffic", str(traffic),
         "--seed", str(seed)], capture_output=True, text=True, timeout=1800,
        env={**os.environ, "LAMBDALAKE_KAFKA__EVENTS_FORMAT": events_format},
    )
    output = result.stdout + result.stderr
    print(output)
    # kept beside the stack's logs: the secret scan reads what the user saw too
    (platform.settings.state_dir / "logs" / f"demo-seed{seed}.out").write_text(output)
    assert result.returncode == 0, output[-4000:]
    base = platform.settings.serving.base_url
    assert output.count(f"curl '{base}/views/") == 3
    assert "from batch (before" in output and "data quality:" in output
    assert f"{traffic} {events_format.upper()} records" in output
    return output


def quarantine_reasons(settings: Settings) -> Counter[str]:
    """Quarantined records by reason, so far."""
    path = settings.table_path(QUARANTINE_TABLE)
    if not table_exists(path):
        return Counter()
    return Counter(DeltaTable(delta_rs_uri(path)).to_pyarrow_table(
        columns=["quarantine_reason"]).column(0).to_pylist())


def speed_views(settings: Settings) -> dict[str, dict[str, Any]]:
    """The speed layer's status per view (its watermark, the rows it dropped as too late)."""
    return (read_status(settings, SPEED_APP) or {}).get("views", {})


def too_late(events: pd.DataFrame, watermark: str | None) -> pd.Series:
    """Which of a demo run's ``events`` the speed layer drops: those at or before its
    watermark when the run began. The run's own lateness stays within the allowance (see
    ``plan_demo``), so only the watermark an earlier run left behind drops any."""
    if watermark is None:
        return pd.Series(False, index=events.index)
    return events["occurred_at"] <= pd.Timestamp(watermark).tz_convert(None)


def test_the_demo_answers_every_view_like_the_ground_truth_and_runs_again(
    platform: Platform,
) -> None:
    """`make demo`'s run on this stack: after ingest, speed and one batch run, the API's
    answer for every view, over a range spanning the high-water mark, equals the views
    computed with pandas from the generator's manifest: batch rows over every event,
    real-time rows over every event but those the speed layer reports as dropped by its
    watermark. A second run adds its traffic, as Avro through the schema registry (a
    producer migrating: readers take both), breaks nothing and counts nothing twice."""
    settings, views = platform.settings, load_views()
    events: list[pd.DataFrame] = []
    kept: dict[str, list[pd.DataFrame]] = {name: [] for name in views}  # by the speed layer
    changes: list[list[dict[str, Any]]] = []  # each run's reference changes (the first's)
    runs = [(20_000, 2026, "json"), (3_000, 2027, "avro")]
    for number, (traffic, seed, events_format) in enumerate(runs, start=1):
        before, quarantined = speed_views(settings), quarantine_reasons(settings)
        run_demo(platform, traffic, seed, events_format)
        after = speed_views(settings)
        manifest = Manifest.read(settings.state_dir / "manifests" / f"demo-seed{seed}.json")
        malformed = {kind: n for kind, n in manifest.counts.items()
                     if kind not in ("valid", "duplicate")}
        assert quarantine_reasons(settings) - quarantined == Counter(malformed), (
            f"run {number} ({events_format}): not every malformed kind is quarantined "
            "under its own reason")
        run_events = manifest_events(manifest)
        events.append(run_events)
        changes.append(manifest.reference_changes)
        assert bool(manifest.reference_changes) == (number == 1)
        every_change = [change for run in changes for change in run]
        truth_events = pd.concat(events)
        start = window(truth_events["occurred_at"].min().floor("h"))
        end = window(truth_events["occurred_at"].max().floor("h")) + timedelta(hours=1)
        for view in views.values():
            late = too_late(run_events, before.get(view.name, {}).get("watermark"))
            kept[view.name].append(run_events[~late])
            dropped = (after[view.name]["dropped_by_watermark_total"]
                       - before.get(view.name, {}).get("dropped_by_watermark_total", 0))
            late_read = run_events[late]["event_type"].isin(view.event_types).sum()
            assert dropped >= late_read, (
                f"run {number}, {view.name}: {late_read} events at or before the speed "
                f"layer's watermark, but it reports {dropped} rows dropped as too late")
            base = settings.serving.base_url
            for surface, (rows, mark) in (
                    ("the rows API", merged_answer(base, view.name, start, end)),
                    ("SQL", sql_answer(base, view, start, end))):
                assert start < mark < end, f"{view.name}: [{start}, {end}) does not span {mark}"
                if view.joins:  # batch as of event time; real-time within what processing allows
                    before_mark = [row for row in rows if window(row["window_start"]) < mark]
                    problems = disagreements(view, before_mark, mark, expected_view(
                        with_attributes_as_of_event_time(truth_events, view, every_change),
                        view, start, mark))
                    speed_events = pd.concat(kept[view.name])
                    candidates = [sum((processing_time_candidates(run, join, changes, at)
                                       for at, run in enumerate(kept[view.name])), [])
                                  for join in view.joins]
                    problems += bounded_disagreements(
                        view, [row for row in rows if window(row["window_start"]) >= mark],
                        bounds_as_of_processing(speed_events, view, candidates, mark, end),
                        totals_over_joins(speed_events, view, mark, end))
                else:
                    truth = pd.concat([
                        expected_view(truth_events, view, start, mark),
                        expected_view(pd.concat(kept[view.name]), view, mark, end)])
                    problems = disagreements(view, rows, mark, truth)
                assert problems == [], f"run {number}, {view.name} ({surface}): {problems[:10]}"
            batch_rows = sum(row["source"] == "batch" for row in rows)
            print(f"run {number}, {view.name}: {len(rows)} rows agree with the ground truth, "
                  f"{batch_rows} from batch before {mark:%H:%M}, the rest real-time "
                  f"({late_read} of the run's events too late for the speed layer, "
                  f"{dropped} rows reported dropped; the same in SQL)")
        assert (read_status(settings, SPEED_APP) or {})["reference"]["stale_joins"] == 0


def prometheus_samples(url: str, **request: Any) -> dict[tuple[str, frozenset[Any]], float]:
    """Every sample a Prometheus scrape of ``url`` reads, by name and labels."""
    answer = httpx.get(url, timeout=30, **request)
    assert answer.status_code == 200, answer.text
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(answer.text)
            for sample in family.samples}


def test_every_component_serves_its_metrics_after_the_demo(platform: Platform) -> None:
    """Scraped as Prometheus would, after the demo's two runs: the query API's state of
    every view and gate (against the publication log and quality history), the ingest
    driver's rows and quarantine by reason (against the quarantine table and the demo's
    manifests), the speed layer's watermarks and drops (against its status), and Airflow's
    own metrics as StatsD datagrams on the configured port."""
    settings, views = platform.settings, load_views()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as statsd:
        statsd.bind((settings.metrics.airflow_statsd_host or "",
                     settings.metrics.airflow_statsd_port))
        statsd.settimeout(90)
        datagram = statsd.recv(65_535).decode()
    assert datagram.startswith("airflow."), datagram

    # read between two reads of what it reports on (a scheduled run or gate may land then)
    before = (httpx.get(f"{settings.serving.base_url}/freshness", timeout=30).json(),
              Counter(result["layer"] for result in read_results(settings)))
    api = prometheus_samples(f"{settings.serving.base_url}/metrics")
    after = (httpx.get(f"{settings.serving.base_url}/freshness", timeout=30).json(),
             Counter(result["layer"] for result in read_results(settings)))
    for name in views:
        view = frozenset({("view", name)})
        assert api["lambdalake_batch_high_water_mark_timestamp_seconds", view] in {
            datetime.fromisoformat(fresh[name]["high_water_mark"]).timestamp()
            for fresh, _ in (before, after)}
        waiting = sorted(fresh[name]["late_rows_waiting"] for fresh, _ in (before, after))
        assert waiting[0] <= api["lambdalake_batch_late_rows_waiting", view] <= waiting[1]
    gates = Counter({layer: int(value) for (name, labels), value in api.items()
                     if name == "lambdalake_quality_gate_duration_seconds_count"
                     for _, layer in labels})
    assert before[1] <= gates <= after[1], (before[1], gates, after[1])

    ingest = prometheus_samples(f"http://{settings.metrics.host}:{settings.metrics.ingest_port}"
                                "/metrics")
    assert ingest["lambdalake_stream_input_rows_total",
                  frozenset({("app", "ingest"), ("query", "ingest")})] >= 23_000
    counted = Counter({dict(labels)["reason"]: int(value) for (name, labels), value
                       in ingest.items() if name == "lambdalake_ingest_quarantined_rows_total"})
    demo = Counter()
    for seed in (2026, 2027):
        manifest = Manifest.read(settings.state_dir / "manifests" / f"demo-seed{seed}.json")
        demo.update({kind: n for kind, n in manifest.counts.items()
                     if kind not in ("valid", "duplicate")})
    assert demo <= counted <= quarantine_reasons(settings), (demo, counted)

    speed = prometheus_samples(f"http://{settings.metrics.host}:{settings.metrics.speed_port}"
                               "/metrics")
    status = speed_views(settings)
    for name in views:
        view = frozenset({("view", name)})
        assert speed["lambdalake_speed_late_rows_dropped_total", view] == \
            status[name]["dropped_by_watermark_total"]
        assert speed["lambdalake_speed_watermark_timestamp_seconds", view] <= time.time()
    print(f"metrics: API {len(api)} samples, ingest {len(ingest)}, speed {len(speed)}; "
          f"quarantined by reason {dict(counted)}; Airflow StatsD: {datagram.splitlines()[0]}")


def test_the_lake_is_on_object_storage_and_the_serving_dag_maintains_it(
    platform: Platform,
) -> None:
    """After the demo: every table and checkpoint is in the object store's bucket (none on
    the local disk), and a run of the serving DAG (reconcile, collapse, retire: delta-rs on
    S3) succeeds."""
    settings = platform.settings
    assert settings.lake.root.startswith("s3a://") and not (settings.state_dir / "lake").exists()
    bucket = platform.object_store.filesystem()
    store = settings.lake.object_store
    tables = {info.base_name for info in bucket.get_file_info(
        FileSelector(f"{store.bucket}/lake"))}
    assert {BRONZE_TABLE, QUARANTINE_TABLE, "realtime_page_traffic", "batch_publications",
            "view_page_traffic_v1"} <= tables, tables
    checkpoints = {info.base_name for info in bucket.get_file_info(
        FileSelector(f"{store.bucket}/checkpoints"))}
    assert any(name.startswith(f"{SPEED_APP}_") for name in checkpoints), checkpoints
    client = AirflowClient(
        settings.airflow.base_url, settings.airflow.admin_user, platform.airflow.admin_password
    )
    run_id = client.trigger("lambdalake_serving", {})
    assert client.wait_for_run("lambdalake_serving", run_id, timeout=600) == "success"
    verdicts = {r["subject"] for r in read_results(settings)
                if r["layer"] == "serving" and r["run_id"] == run_id}
    assert verdicts == set(load_views()), verdicts  # each view reconciled on S3


def test_bronze_compaction_beside_ingest_on_object_storage_loses_nothing(
    platform: Platform,
) -> None:
    """The bronze maintenance step (an OPTIMIZE from the Spark Connect server's driver) runs
    while ingest appends to bronze from its own driver, both committing to one table on S3
    through the conditional-put log store: every produced record is in bronze once, and the
    closed partitions' small files were compacted into files stored as ingest stores them."""
    settings = platform.settings
    bronze = delta_rs_uri(settings.table_path(BRONZE_TABLE))
    wait_caught_up(settings, timeout=300)
    rows_before, files_before = DeltaTable(bronze).to_pyarrow_table(
        columns=["event_id"]).num_rows, len(DeltaTable(bronze).file_uris())
    produced = 30_000
    producer = subprocess.Popen(
        [str(Path(sys.executable).parent / "lambdalake"), "produce", "--count", str(produced),
         "--rate", "3000", "--late", "0", "--duplicates", "0", "--malformed", "0",
         "--seed", "33"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(3)  # ingest is committing micro-batches of the new traffic
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    compaction = subprocess.run(
        [sys.executable, str(Path(__file__).resolve().parents[2] / "spark_jobs" /
                             "compact_bronze.py"), "--before", tomorrow],
        capture_output=True, text=True, timeout=900)
    assert compaction.returncode == 0, compaction.stdout[-3000:] + compaction.stderr[-3000:]
    assert producer.wait(timeout=300) == 0, producer.stdout.read() if producer.stdout else ""
    summary = compaction.stdout.strip().splitlines()[-1]
    assert int(summary.split()[1]) > 0, summary  # "compact-bronze: N small files compacted"
    wait_caught_up(settings, timeout=300)
    table = DeltaTable(bronze)
    assert table.to_pyarrow_table(columns=["event_id"]).num_rows == rows_before + produced
    compactions = [entry["version"] for entry in table.history(limit=50)
                   if entry["operation"] == "OPTIMIZE"]
    assert compactions
    # the compacted files are stored as ingest writes bronze's (FILE_WRITE_CONF), not
    # with Spark's defaults (INT96 timestamps, dictionaries on every column)
    compacted = files_committed(settings.table_path(BRONZE_TABLE), compactions[0])
    assert compacted
    assert {file_storage(path) for path in compacted} == {WRITTEN_AS_INGEST_WRITES}
    print(f"{summary}; bronze on S3: {rows_before} + {produced} rows ({files_before} files "
          f"before, {len(table.file_uris())} after)")


def reference_quarantine_reasons(settings: Settings) -> Counter[str]:
    """Reference changes ingest quarantined, by reason, so far."""
    table = DeltaTable(delta_rs_uri(settings.table_path(REFERENCE_QUARANTINE_TABLE)))
    return Counter(table.to_pyarrow_table(columns=["quarantine_reason"]).column(0).to_pylist())


def test_a_killed_speed_layer_rebuilds_its_reference_state_from_the_compacted_topics(
    platform: Platform, figures: Figures,
) -> None:
    """After the demo's reference data: the speed layer's state is the manifest's current
    state; the log cleaner compacts the topics; the speed layer is SIGKILLed and started
    again, and its state rebuilt from the compacted topics is what they hold, which is the
    manifest's for every key whose last record is well-formed (a malformed last record
    shadows its key's good value once the cleaner has run)."""
    settings = platform.settings
    changes = Manifest.read(settings.state_dir / "manifests" / "demo-seed2026.json"
                            ).reference_changes
    held = {join.entity: join.attributes for view in load_views().values()
            for join in view.joins}
    truth: dict[str, dict[str, tuple[str, ...]]] = {entity: {} for entity in held}
    for change in changes:
        if change["entity"] in held and change["kind"] not in REFERENCE_MALFORMED_KINDS:
            state = truth[change["entity"]]
            if change["value"] is None:
                state.pop(change["key"], None)
            else:
                state[change["key"]] = tuple(str(change["value"][a])
                                             for a in held[change["entity"]])
    last_kind = {(c["entity"], c["key"]): c["kind"] for c in changes}
    shadowed = {key for key, kind in last_kind.items() if kind in REFERENCE_MALFORMED_KINDS}

    def reference_status() -> dict[str, dict[str, Any]]:
        status = (read_status(settings, SPEED_APP) or {}).get("reference") or {}
        return status.get("entities") or {}

    def digests() -> dict[str, str]:
        return {e: s["digest"] for e, s in reference_status().items()}

    # a poison flood of a tenth of the demo's changes on the product topic, each under a
    # key of its own: ingest quarantines each once with its reason, the speed layer skips
    # each and keeps following (a value nested too deep once killed its follower for good)
    assert "product" in held
    poison = poison_changes("poison", max(40, len(changes) // 10),
                            settings.ingest.max_record_bytes)
    skipped_before = reference_status()["product"]["skipped"]
    quarantined_before = reference_quarantine_reasons(settings)
    producer = Producer({**settings.kafka.client_config(), "enable.idempotence": True})
    for key, value, _ in poison:
        producer.produce(settings.kafka.entity_topic("product").name, value, key.encode())
    assert producer.flush(60) == 0
    wait_caught_up(settings, timeout=300)
    assert reference_quarantine_reasons(settings) - quarantined_before == Counter(
        reason for _, _, reason in poison)
    deadline = time.monotonic() + 180
    while reference_status()["product"]["skipped"] - skipped_before < len(poison):
        assert time.monotonic() < deadline, (skipped_before, reference_status())
        time.sleep(2)
    assert reference_status()["product"]["skipped"] - skipped_before == len(poison)
    assert speed_process(platform).pid() is not None
    figures(poison_records=len(poison), quarantined_once=len(poison),
            skipped_by_the_speed_layer=len(poison))

    assert digests() == {e: digest(state) for e, state in truth.items()}

    topics = [settings.kafka.entity_topic(entity).name for entity in held]
    produced = records_in(settings, topics)
    with compacting_now(settings, topics):
        deadline = time.monotonic() + 180
        while records_in(settings, topics) >= produced:
            assert time.monotonic() < deadline, "the log cleaner did not compact the topics"
            time.sleep(2)
    left = {entity: latest_good_values(settings, entity, attributes)
            for entity, attributes in held.items()}
    for entity, state in left.items():
        assert {k: v for k, v in state.items() if (entity, k) not in shadowed} == {
            k: v for k, v in truth[entity].items() if (entity, k) not in shadowed}

    killed = speed_process(platform).pid()
    speed_process(platform).kill()
    platform.speed.start()
    deadline = time.monotonic() + 300
    while (read_status(settings, SPEED_APP) or {}).get("pid") in (None, killed):
        assert time.monotonic() < deadline, "the speed layer did not come back"
        time.sleep(1)
    rebuilt = digests()
    now_held = {entity: latest_good_values(settings, entity, attributes)
                for entity, attributes in held.items()}
    assert now_held == left, "the log cleaner was still at work during the restart"
    assert rebuilt == {e: digest(state) for e, state in left.items()}
    print(f"rebuilt after SIGKILL from {records_in(settings, topics)} records (of {produced} "
          f"produced): {rebuilt}; keys {[len(s) for s in left.values()]}, "
          f"{len(shadowed)} shadowed by a malformed last record")


def digest(state: dict[str, tuple[str, ...]]) -> str:
    """A state's digest as the speed layer's status reports it."""
    combined = 0
    for key, values in state.items():
        combined ^= entry_hash(key, values)
    return f"{combined:016x}"


def test_a_v2_schema_registered_mid_stream_flows_through_ingest_and_speed(
    platform: Platform, tmp_path: Path
) -> None:
    """A producer registers page_view v2 (a new optional field) while ingest and the speed
    layer run, and sends v2 Avro: both read it as v1, the newest contract they know, without
    a restart of either (their queries start again, planned with the new schema, in the
    same process): every event lands in bronze as valid and counts in the real-time view."""
    settings = platform.settings
    running = {p.name: p.pid() for p in (platform.ingest.process, speed_process(platform))}
    v2 = contracts_with_page_view_v2(tmp_path / "events")
    client = registry_client(settings.registry)
    topic = settings.kafka.events_topic.name
    register_contracts(client, v2, topic, settings.registry.compatibility)
    now = datetime.now(UTC)
    sent = [{"event_id": f"v2-{i:03d}", "event_type": "page_view", "user_id": f"u-{i % 7}",
             "session_id": f"s-{i % 11}", "schema_version": 2, "country": "DE",
             "device": "mobile", "page": "/v2-arrivals", "referrer": "https://example.org",
             "occurred_at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
            for i in range(40)]
    codec = AvroEventCodec(client, v2, topic)
    producer = EventProducer(settings.kafka, topic)
    for event in sent:
        v2.validate(event)
        producer.send(event["user_id"], codec.encode(event))
    assert producer.flush() == 0 and producer.counts.acknowledged == len(sent)
    wait_caught_up(settings, timeout=300)
    bronze = DeltaTable(delta_rs_uri(settings.table_path(BRONZE_TABLE))).to_pyarrow_table(
        columns=["event_id", "schema_version", "page"], filters=[("page", "=", "/v2-arrivals")])
    assert sorted(bronze.column("event_id").to_pylist()) == [e["event_id"] for e in sent]
    assert set(bronze.column("schema_version").to_pylist()) == {2}
    hour = now.replace(minute=0, second=0, microsecond=0)
    deadline = time.monotonic() + 180
    while True:
        rows = httpx.get(f"{settings.serving.base_url}/views/page_traffic/rows", timeout=30,
                         params={"from": hour.isoformat(), "to": (hour + timedelta(hours=1)
                                 ).isoformat(), "where": "page=/v2-arrivals"}).json()["rows"]
        if sum(row["views"] for row in rows) >= len(sent) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert [(row["source"], row["views"]) for row in rows] == [("realtime", len(sent))]
    assert {p.name: p.pid() for p in (platform.ingest.process, speed_process(platform))
            } == running
    for process in (platform.ingest.process, speed_process(platform)):  # queries planned anew
        assert "starts again, planned anew: the events topic's registered schemas changed" in (
            process.log_tail(500)), process.name


def caught_up_through_restarts(platform: Platform, timeout: float) -> list[str]:
    """``wait_caught_up``, waiting meanwhile for the supervisor DAG (every
    ``speed.supervise_every_seconds``) to start ingest again whenever it is down; what
    stopped it each time."""
    settings, stopped = platform.settings, []
    deadline = time.monotonic() + timeout
    while True:
        try:
            wait_caught_up(settings, timeout=max(1.0, deadline - time.monotonic()))
            return stopped
        except StackError as error:
            if platform.ingest.process.pid() is not None or time.monotonic() > deadline:
                raise
            stopped.append(str(error).splitlines()[0])
            while platform.ingest.process.pid() is None:
                assert time.monotonic() < deadline, f"ingest was not started again: {stopped}"
                time.sleep(2)


@pytest.mark.chaos
def test_the_object_store_killed_under_ingest_loses_and_duplicates_nothing(
    platform: Platform, figures: Figures, tmp_path: Path,
) -> None:
    """s3proxy SIGKILLed while ingest commits new traffic to bronze on S3, and started
    again 20 s later: ingest rides the outage out, or fails and the supervisor DAG starts it
    again from its checkpoint; either way every produced record is in bronze once, the
    query API answers again, and the speed layer runs (started again by the supervisor DAG
    if the outage failed its query)."""
    settings = platform.settings
    bronze = delta_rs_uri(settings.table_path(BRONZE_TABLE))
    wait_caught_up(settings, timeout=300)
    speed_before = speed_process(platform).pid()
    produced, manifest = 20_000, tmp_path / "manifest.json"
    producer = subprocess.Popen(
        [str(Path(sys.executable).parent / "lambdalake"), "produce", "--count", str(produced),
         "--rate", "2000", "--late", "0", "--duplicates", "0", "--malformed", "0",
         "--seed", "35", "--manifest", str(manifest)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    version = DeltaTable(bronze).version()
    deadline = time.monotonic() + 120
    while DeltaTable(bronze).version() == version:  # ingest is committing the new traffic
        assert time.monotonic() < deadline, "ingest committed nothing of the new traffic"
        time.sleep(0.5)
    platform.object_store.process.kill()
    time.sleep(20)
    platform.object_store.start()
    assert producer.wait(timeout=300) == 0, producer.stdout.read() if producer.stdout else ""
    stopped = caught_up_through_restarts(platform, timeout=900)
    sent = set(Manifest.read(manifest).valid_event_ids)
    assert len(sent) == produced
    rows = DeltaTable(bronze).to_pyarrow_table(columns=["event_id", "partition", "offset"])
    coordinates = list(zip(rows.column("partition").to_pylist(),
                           rows.column("offset").to_pylist(), strict=True))
    assert len(set(coordinates)) == len(coordinates)  # no Kafka record twice in bronze
    landed = Counter(event_id for event_id in rows.column("event_id").to_pylist()
                     if event_id in sent)
    assert set(landed) == sent, (len(sent - set(landed)), stopped)  # none lost
    assert set(landed.values()) == {1}, stopped  # none twice
    base = settings.serving.base_url
    deadline = time.monotonic() + 120
    while httpx.get(f"{base}/views/page_traffic/rows", timeout=10).status_code != 200:
        assert time.monotonic() < deadline, "the query API did not answer again"
        time.sleep(2)
    # the speed layer may fail on the outage (its commits to S3 do): the supervisor DAG
    # starts it again, so the stack is whole again for what follows
    deadline = time.monotonic() + 420
    while speed_process(platform).pid() is None or (
            read_status(settings, SPEED_APP) or {}).get("active") is not True:
        assert time.monotonic() < deadline, "the speed layer did not come back"
        time.sleep(2)
    figures(produced=produced, in_bronze_once=len(landed), lost=0, duplicated=0,
            ingest_restarts=len(stopped), stopped_by=stopped[:1],
            speed_layer_restarted=speed_process(platform).pid() != speed_before)


def test_the_data_quality_page_is_in_airflow_behind_its_login(platform: Platform) -> None:
    settings = platform.settings
    base = settings.airflow.base_url
    token = httpx.post(f"{base}/auth/token", timeout=30, json={
        "username": settings.airflow.admin_user, "password": platform.airflow.admin_password,
    }).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    plugins = httpx.get(f"{base}/api/v2/plugins", headers=auth, timeout=30).json()["plugins"]
    assert "lambdalake_quality" in {plugin["name"] for plugin in plugins}
    assert httpx.get(f"{base}/lambdalake-quality/", timeout=30).status_code == 401
    page = httpx.get(f"{base}/lambdalake-quality/", headers=auth, timeout=30)
    assert page.status_code == 200
    assert "Per layer and subject" in page.text and "product_sales" in page.text  # the demo's
    cookie = httpx.get(f"{base}/lambdalake-quality/", cookies={"_token": token}, timeout=30)
    assert cookie.status_code == 200  # how the UI's iframe is let in


DATA_DOCS_PAGE = r"""() => ({
    status: document.querySelector('#section-1').innerText,
    contents: [...document.querySelectorAll('.ge-navigation-sidebar-link')]
        .map(link => link.innerText.trim()),
    rowCounts: [...document.querySelectorAll('#section-2 tr')]
        .map(row => [...row.querySelectorAll('td')].map(cell => cell.innerText.trim()))
        .filter(cells => cells.length > 2 && /rows\.$/.test(cells[1]))
        .map(cells => cells[2])})"""
"""What a Data Docs page shows: its status, its table of contents, and the observed value
of each row-count expectation (the table-level section: status, expectation, observed)."""


def test_the_data_quality_page_renders_in_chromium_after_logging_in(platform: Platform) -> None:
    """Debian's chromium, driven by Playwright: the page refuses a visitor who has not
    logged in, shows the demo's recorded validations inside the Airflow UI once logged in
    through the login form, and loads nothing from beyond loopback. Its Data Docs pages
    say the verdict the page says and the rows the gate counted, keep the gate's derived
    columns out of the table's, and their Home and suite links land on pages of the
    plugin, not on Airflow's 404."""
    from playwright.sync_api import sync_playwright

    settings = platform.settings
    base = settings.airflow.base_url
    remote: list[str] = []
    # what was recorded before the page was asked for: the speed supervisor's real-time
    # gates go on recording, so a subject first recorded after the page rendered may be new
    results = read_results(settings)
    recorded = {(r["layer"], r["subject"]) for r in results}
    documented = {layer: next(r for r in recent(results, layer, limit=len(results))
                              if r.get("docs")) for layer in ("bronze", "batch")}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("request", lambda request: remote.append(request.url)
                    if not is_loopback_url(request.url) else None)
            anonymous = page.goto(f"{base}/lambdalake-quality/")
            assert anonymous is not None and anonymous.status == 401
            log_in(page, platform)
            page.goto(f"{base}/plugin/data-quality")  # the nav entry: the page in an iframe
            frame = page.frame_locator("iframe").first
            frame.get_by_text("Most recently recorded validations").wait_for(timeout=60_000)
            text = frame.locator("body").inner_text()
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shot = SCREENSHOTS / "data-quality-page.png"
            page.screenshot(path=str(shot), full_page=True)
            shown = {}
            for layer, result in documented.items():
                page.goto(f"{base}/lambdalake-quality/docs/{result['docs']}")
                page.locator("#section-1").wait_for(timeout=30_000)
                shown[layer] = page.evaluate(DATA_DOCS_PAGE)
            page.screenshot(path=str(SCREENSHOTS / "data-docs-in-airflow.png"), full_page=True)
            with page.expect_navigation():
                page.locator("a[href^='../expectations/']").first.click()
            suite_text = page.locator("body").inner_text()
            with page.expect_navigation():
                page.locator("ol.ge-breadcrumbs a", has_text="Home").click()
            home = (page.url, page.locator("body").inner_text())
        finally:
            browser.close()
    for layer, result in documented.items():
        assert f"Status: {verdict(result)}" in " ".join(shown[layer]["status"].split()), layer
        assert not any(entry.startswith("_") for entry in shown[layer]["contents"]), layer
    counted = shown["bronze"]["rowCounts"]  # observed, as GX formats it ("5,634")
    assert counted and {int("".join(filter(str.isdigit, cell))) for cell in counted} == {
        documented["bronze"]["rows"]}, counted
    assert "Derived checks" in shown["batch"]["contents"]  # every view suite has _window
    assert "Expectation Suite" in suite_text and "Derived checks" in suite_text
    assert home[0] == f"{base}/lambdalake-quality/" and "Per layer and subject" in home[1]
    assert {layer for layer, _ in recorded} >= {"bronze", "batch", "serving"}  # the demo's
    for layer, subject in recorded:
        assert f"{layer}\t{subject}" in text, f"{layer} {subject} missing from the page"
    assert remote == [], f"the page loaded assets from beyond loopback: {remote}"
    print(f"data-quality page: {len(recorded)} layer/subject rows shown; screenshot {shot}")


def test_the_data_quality_pages_form_narrows_it_and_a_run_id_opens_its_run(
    platform: Platform,
) -> None:
    """In Chromium, logged in: choosing the layer ``batch`` in the page's form shows only
    batch subjects; a run id in its validations opens that run's page in Airflow."""
    base = platform.settings.airflow.base_url
    with fenced_page(is_loopback_url, viewport={"width": 1400, "height": 900}) as (page, refused):
        log_in(page, platform)
        page.goto(f"{base}/lambdalake-quality/")
        page.locator("select[name=layer]").select_option("batch")
        with page.expect_navigation():
            page.get_by_role("button", name="Show").click()
        narrowed = page.url
        layers = {row.locator("td").first.inner_text()
                  for row in page.locator("table").first.locator("tbody tr").all()}
        run = page.locator("a[target=_top][href^='/dags/lambdalake_batch_views/runs/']").first
        run_id = run.inner_text()
        with page.expect_navigation():
            run.click()
        opened = page.url
    assert "layer=batch" in narrowed and layers == {"batch"}, (narrowed, layers)
    assert opened.startswith(f"{base}/dags/lambdalake_batch_views/runs/"), opened
    assert f"/runs/{run_id}" in unquote(opened), (run_id, opened)
    assert refused == [], f"the page asked beyond loopback: {refused}"


def test_the_pipeline_status_page_shows_every_view_as_the_query_api_and_charts_its_history(
    platform: Platform,
) -> None:
    """After the demo's run, the backfills and the serving DAG's maintenance above: the
    Pipeline status page, opened from its nav entry in Chromium with everything beyond
    loopback refused, shows each view's mark and what was published beyond it as the query
    API's ``/freshness`` says, a batch verdict per view, and charts of the publishes, the
    streams' lag, the gates' and the runs' durations."""
    settings = platform.settings
    base = settings.airflow.base_url

    def freshness() -> dict[str, Any]:
        return dict(httpx.get(f"{settings.serving.base_url}/freshness", timeout=30,
                              headers=settings.serving.auth_headers()).json())

    assert httpx.get(f"{base}/lambdalake-status/", timeout=30).status_code == 401
    before = freshness()
    with fenced_page(is_loopback_url, viewport={"width": 1400, "height": 900}) as (page, refused):
        log_in(page, platform)
        rows, charts = pipeline_status(page, platform, "pipeline-status-page.png")
    after = freshness()  # a scheduled run may have moved a mark while the page rendered
    assert set(rows) == set(load_views()) == set(before)
    for view, cells in rows.items():
        marks = {answer[view]["high_water_mark"][:16].replace("T", " ")
                 for answer in (before, after)}
        assert cells[1] in marks, (view, cells, marks)
        assert cells[3] != "never", (view, cells)  # the demo published every view
        assert cells[8].startswith("passed"), (view, cells)  # its batch verdict
    for title in ("Batch freshness", "Stream lag", "Gate durations", "DAG run durations"):
        assert charts.get(title, 0) >= 1, (title, charts)
    assert refused == [], f"the page asked beyond loopback: {refused}"
    print(f"pipeline status page: {len(rows)} views, lines per chart {charts}")


def test_the_query_apis_interactive_docs_work_with_the_network_blocked(
    platform: Platform,
) -> None:
    """Chromium opens the query API's ``/docs`` with every request beyond loopback refused:
    Swagger UI renders the API's operations from the copy setup fetched."""
    with fenced_page(is_loopback_url) as (page, refused):
        page.goto(f"{platform.settings.serving.base_url}/docs")
        page.locator(".opblock-summary-path", has_text="/views/{view}/rows").wait_for(
            timeout=30_000)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "query-api-docs.png"), full_page=True)
    assert refused == [], f"/docs asked beyond loopback: {refused}"


def stack_secrets(settings: Settings) -> dict[str, str]:
    """Every secret the stack generated (``secrets/``), and the passwords Airflow's login
    holds, by where each lives."""
    found = {path.name: path.read_text().strip()
             for path in secrets_dir(settings).iterdir() if path.is_file()}
    logins = json.loads((settings.state_dir / "airflow" / "simple_auth_manager_passwords.json")
                        .read_text())
    return {**found, **{f"airflow login {user}": password for user, password in logins.items()}}


def test_no_log_status_or_command_output_of_the_run_shows_a_secret(
    platform: Platform, figures: Figures,
) -> None:
    """After the demo runs, the backfills, the kills and restarts above: every log and
    status file of the stack (Airflow's task logs included), the demo's output, and what
    the status commands print hold none of the stack's secrets."""
    settings = platform.settings
    secrets = stack_secrets(settings)
    assert {"spark-connect-token", "object-store-secret-key", "airflow-admin-password",
            "airflow-trigger-password", "postgres-airflow-password"} <= set(secrets)
    assert all(len(secret) >= 16 for secret in secrets.values()), "generated, not guessable"
    lambdalake = str(Path(sys.executable).parent / "lambdalake")
    printed = {" ".join(command): subprocess.run(
        [lambdalake, *command], capture_output=True, text=True, timeout=300).stdout
        for command in (["status"], ["spark-connect", "status"], ["quality"])}
    files = [path for folder in ("logs", "status", "quality", "run", "manifests",
                                 "airflow/logs")
             for path in (settings.state_dir / folder).rglob("*") if path.is_file()]
    assert any(path.name.startswith("demo-seed") for path in files)
    assert any("airflow/logs" in str(path) and path.suffix == ".log" for path in files)
    outputs = {**printed, **{str(path): path.read_text(errors="replace") for path in files}}
    leaks = [(name, where) for name, secret in secrets.items()
             for where, text in outputs.items() if secret in text]
    figures(outputs_scanned=len(outputs), secrets=len(secrets), leaks=len(leaks))
    assert leaks == [], leaks


def bronze_events(settings: Settings) -> pd.DataFrame:
    """Every valid event in bronze (each copy), ``occurred_at`` naive UTC."""
    bronze = DeltaTable(delta_rs_uri(settings.table_path(BRONZE_TABLE))).to_pandas()
    bronze["occurred_at"] = pd.to_datetime(bronze["occurred_at"], utc=True).dt.tz_localize(None)
    return bronze


def test_the_tutorials_bring_an_event_type_and_two_views_to_the_running_stack(
    platform: Platform,
) -> None:
    """*Bring your own events*, then *Add a view*, on this stack after its demo, each block
    of the two pages run as written (its project dir is a copy, so their files land there;
    one restart serves both pages'): the search contract checks, a search sent before the
    restart is quarantined as an unknown type, the restart registers the contract and the
    searches sent after it count in real time; device_traffic's past, filled by the page's
    recompute from the first day to the other views' mark, moves its mark there and equals
    pandas over bronze for every key."""
    settings, own, add = platform.settings, "own-events.md", "add-a-view.md"
    project, base = settings.project_path(), settings.serving.base_url
    [contract] = blocks(own, "json")
    (project / "schemas" / "events" / "search.v1.json").write_text(contract)
    check_contracts, restart, query_searches = blocks(own, "bash")
    assert "search v1" in run_shell_block(check_contracts)
    assert "## search v1" in (project / "docs" / "events.md").read_text()  # regenerated
    [producer] = blocks(own, "python")
    producer = edited(producer, {"127.0.0.1:9092": settings.kafka.bootstrap_servers,
                                 '"lambdalake.events"': repr(settings.kafka.events_topic.name)})

    def send_a_search() -> None:
        exec(compile(producer, own, "exec"), {})

    quarantined = quarantine_reasons(settings)
    send_a_search()
    wait_caught_up(settings, timeout=300)
    assert quarantine_reasons(settings) - quarantined == Counter({"unknown_event_type": 1})

    definitions = [*blocks(own, "yaml"), *blocks(add, "yaml")]
    for definition in definitions:
        name = yaml.safe_load(definition)["name"]
        (project / "schemas" / "views" / f"{name}.yaml").write_text(definition)
    check_views, restart_again, fill_past, query_device_traffic = blocks(add, "bash")
    listed = run_shell_block(check_views)
    assert "'device_traffic'" in listed and "'searches'" in listed
    assert shlex.split(restart_again, comments=True) == shlex.split(restart, comments=True)
    run_shell_block(restart, timeout=1200)
    registry = registry_client(settings.registry)
    events_topic = settings.kafka.events_topic.name
    assert registry.get_latest_version(registry_subject(events_topic, "search")).version == 1

    for _ in range(3):
        send_a_search()
    wait_caught_up(settings, timeout=300)
    deadline, rows = time.monotonic() + 180, []
    while time.monotonic() < deadline:
        rows = httpx.get(f"{base}/views/searches/rows", params={"where": "country=DE"},
                         timeout=30).json()["rows"]
        if sum(row["searches"] for row in rows) >= 3:
            break
        time.sleep(1)
    answered = [(row["source"], row["searches"], row["searchers"], row["empty_searches"],
                 row["average_results"]) for row in rows]
    assert answered == [("realtime", 3, 1, 0, 12.0)]
    table, curl = query_searches.splitlines()
    assert "DE" in run_shell_block(table)
    assert json.loads(run_shell_block(edited(curl, {"http://127.0.0.1:8000": base})))["rows"] == rows

    bronze = bronze_events(settings)  # the past to fill: from the schedule's first day
    start = datetime.combine(settings.batch.first_day, datetime.min.time(), tzinfo=UTC)
    mark = window(httpx.get(f"{base}/freshness", timeout=30).json()["page_traffic"][
        "high_water_mark"])  # to the other views' mark, as the page says
    assert mark - start >= timedelta(hours=2), (start, mark)
    run_id = triggered_run_id(run_shell_block(redated(fill_past, start, mark)))
    assert admin_client(settings).wait_for_run(BATCH_DAG_ID, run_id, timeout=900) == "success"
    view = load_views(project / "schemas" / "views",
                      ContractRegistry(project / "schemas" / "events"))["device_traffic"]
    rows, served_mark = merged_answer(base, view.name, start, mark)
    assert served_mark >= mark  # past it if a scheduled run published the next hour since
    truth = expected_view(first_copies(bronze), view, start, mark)
    assert len(truth) > 10 and disagreements(view, rows, served_mark, truth) == []
    query, curl_rows, curl_view = query_device_traffic.splitlines()
    assert "mobile" in run_shell_block(query)
    answer = json.loads(run_shell_block(edited(curl_rows, {"http://127.0.0.1:8000": base})))
    assert answer["rows"] and {row["country"] for row in answer["rows"]} == {"DE"}
    described = json.loads(run_shell_block(edited(curl_view, {"http://127.0.0.1:8000": base})))
    assert [m["name"] for m in described["measures"]] == ["views", "unique_users"]


def test_down_stops_everything_it_started(platform: Platform) -> None:
    assert stack_processes(platform.settings), "the stack's processes should be findable"
    stopped = platform.down()
    named = [name for name in stopped if not name.startswith("straggler ")]
    assert len(named) == len(platform.processes())  # and any straggler after them
    deadline = time.monotonic() + 10
    while stack_processes(platform.settings) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert stack_processes(platform.settings) == []
    assert platform.down() == []

