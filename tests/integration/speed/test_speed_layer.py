"""The speed layer on real Kafka, as one process and as two shards (each owning some of the
topic's partitions), SIGKILLed three times (one shard of two) and restarted by its
supervisor, converges to the batch layer: every closed interval's exact measures equal the batch
layer's, approximate ones are within their stated error, and events older than the
watermark are counted by the query that dropped them (the batch layer includes them).
The serving layer then merges both real layers at the batch high-water mark: answers stay
exact while the mark moves and after the real-time rows it covers are reconciled,
collapsed and retired."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from deltalake import DeltaTable

from lambdalake.batch.publication import Publication, publish
from lambdalake.contracts.registry import encode_event
from lambdalake.generator.traffic import Manifest, TrafficGenerator, TrafficProfile
from lambdalake.ingest.service import start_ingest_process, wait_caught_up
from lambdalake.kafka.topics import ensure_topic
from lambdalake.quality.realtime_gate import validate_realtime
from lambdalake.quality.suites.realtime import realtime_suite
from lambdalake.serving.maintenance import maintain
from lambdalake.serving.query import json_value, parse_query, run_query
from lambdalake.serving.snapshot import SnapshotStore
from lambdalake.settings import Settings
from lambdalake.speed.realtime import current_rows, realtime_table
from lambdalake.speed.service import SpeedLayer, wait_speed_caught_up
from lambdalake.speed.shards import shards, speed_status
from lambdalake.speed.stream import queries_of
from lambdalake.speed.supervisor import ensure_running
from lambdalake.streaming.service import app_process
from lambdalake.timeutil import parse_utc
from lambdalake.views.catalog import current_table_path, current_version
from lambdalake.views.definition import ViewDefinition, load_views
from tests.support.background import Background
from tests.support.batch_runs import stage_and_promote
from tests.support.ground_truth import DOUBLE_KINDS, same_value
from tests.support.streaming_chaos import kill_mid_batch, produce_in_background

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENTS = 200_000
KILLS = 3
TOO_LATE = 40  # page views sent ~3 hours behind the stream: older than every watermark
TOO_LATE_PAGE = "/too-late"
HOURS = 3
PRODUCTS = 40  # so a key's order_value events name at most 40 products


@dataclass
class SpeedRun:
    shards: int
    settings: Settings
    start: datetime
    manifest: Manifest
    supervisor_said: list[str]
    status: dict[str, Any]


def too_late_copies(profile: TrafficProfile, count: int) -> list[dict[str, Any]]:
    """New page views of users and sessions active in the first hour, dated then."""
    assert profile.start_time is not None
    first_hour = [(profile.start_time + timedelta(minutes=m)).isoformat(timespec="milliseconds")
                  .replace("+00:00", "Z")
                  for m in (5, 60)]  # late events of the generator reach back 3 minutes
    copies = []
    for record in TrafficGenerator(profile).records():
        event = record.event
        if record.kind == "valid" and event["event_type"] == "page_view" and \
                first_hour[0] <= event["occurred_at"] < first_hour[1]:
            event_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"too-late-{len(copies)}"))
            copies.append({**event, "event_id": event_id, "page": TOO_LATE_PAGE})
        if len(copies) == count:
            return copies
    raise AssertionError("not enough first-hour page views to copy")


@pytest.fixture(scope="module", params=[1, 2], ids=["one process", "two shards"])
def speed_run(kafka: Any, tmp_path_factory: pytest.TempPathFactory,
              request: pytest.FixtureRequest) -> Iterator[SpeedRun]:
    root = tmp_path_factory.mktemp("speed")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {
            "LAMBDALAKE_SPEED__SHARDS": str(request.param),
            "LAMBDALAKE_KAFKA__EVENTS_TOPIC__NAME": f"test.speed.{uuid.uuid4().hex[:8]}",
            "LAMBDALAKE_LAKE__ROOT": str(root / "lake"),
            "LAMBDALAKE_LAKE__CHECKPOINT_ROOT": str(root / "checkpoints"),
            "LAMBDALAKE_STATE_DIR": str(root / "state"),
            "LAMBDALAKE_INGEST__TRIGGER_INTERVAL": "1 second",
            # with two shards the killed one reads one partition of three: smaller batches
            # keep one in flight after each restart (its third of the stream in 7 or more)
            "LAMBDALAKE_SPEED__MAX_OFFSETS_PER_TRIGGER": "30000" if request.param == 1
            else "10000",
            "LAMBDALAKE_SPEED__STATUS_INTERVAL_SECONDS": "0.5",
        }.items():
            patch.setenv(key, value)
        settings = Settings()
        ensure_topic(settings.kafka, settings.kafka.events_topic)
        start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
        profile = TrafficProfile(count=EVENTS, rate=4_000, start_time=start,
                                 event_time_rate=EVENTS / (HOURS * 3600), late_fraction=0.05,
                                 max_lateness_minutes=3, duplicate_fraction=0.02,
                                 malformed_fraction=0.01, users=2_000, pages=20, products=PRODUCTS,
                                 seed=31)
        try:
            start_ingest_process(settings)
            production = produce_in_background(settings, profile)
            victim = shards(settings)[-1]  # the only one, or the second of two
            process = app_process(settings, victim.app)
            checkpoints = [Path(settings.checkpoint_path(victim.checkpoint(name)))
                           for name in queries_of(list(load_views().values()))]
            said, last_committed = [], {}
            for _ in range(KILLS):
                said.append(ensure_running(settings))
                last_committed = kill_mid_batch(process, checkpoints, last_committed)
                assert process.pid() is None
            said.append(ensure_running(settings))
            manifest = production.manifest(timeout=600)
            wait_speed_caught_up(settings, timeout=600)
            for event in too_late_copies(profile, TOO_LATE):
                production.producer.send(event["user_id"].encode(), encode_event(event))
            production.producer.flush()
            wait_speed_caught_up(settings, timeout=300)
            wait_caught_up(settings, timeout=600)
            yield SpeedRun(request.param, settings, start, manifest, said, speed_status(settings))
        finally:
            SpeedLayer(settings).stop()
            app_process(settings, "ingest").stop(timeout=60, root_first=True)


def closed_windows(run: SpeedRun, view: ViewDefinition) -> datetime:
    """Windows that end at or before this view's watermark are closed in the speed layer."""
    watermark = run.status["views"][view.name]["watermark"]
    return datetime.fromisoformat(watermark.replace("Z", "+00:00"))


def both_layers(spark: SparkSession, run: SpeedRun, view: ViewDefinition
                ) -> tuple[dict[tuple, dict], dict[tuple, dict]]:
    """{key: measures} of the batch and the real-time view, for the closed windows."""
    watermark = closed_windows(run, view)
    end = watermark.replace(minute=0, second=0, microsecond=0)
    stage_and_promote(spark, run.settings, [view], run.start, end, "convergence-test")
    measures = [m.name for m in view.measures]

    def rows(found: list[dict[str, Any]]) -> dict[tuple, dict]:
        naive = [{k: v.replace(tzinfo=None) if isinstance(v, datetime) else v
                  for k, v in r.items()} for r in found]
        return {tuple(r[k] for k in view.key): {m: r[m] for m in measures} for r in naive
                if r["window_start"] >= run.start.replace(tzinfo=None)
                and r["window_end"] <= end.replace(tzinfo=None)}

    batch = spark.read.format("delta").load(current_table_path(run.settings, view.name))
    return (rows([r.asDict() for r in batch.collect()]),
            rows(current_rows(run.settings, view).to_pylist()))


@pytest.mark.chaos
def test_the_supervisor_restarted_the_speed_layer_after_each_kill(speed_run: SpeedRun) -> None:
    said = [line.split("; ") for line in speed_run.supervisor_said]
    if speed_run.shards == 1:
        assert said[0][0].startswith("speed layer started"), said
        assert all(s[0].startswith("speed layer restarted after a crash") for s in said[1:]), said
    else:  # the second shard was killed; the first ran on
        assert [s.startswith(f"speed shard {i} of 2 started") for i, s in enumerate(said[0])
                ] == [True, True], said
        assert all(s[0].startswith("speed shard 0 of 2 running") and
                   s[1].startswith("speed shard 1 of 2 restarted after a crash")
                   for s in said[1:]), said
    assert len(said) == KILLS + 1
    assert speed_run.manifest.acknowledged == speed_run.manifest.produced == EVENTS


@pytest.mark.parametrize("view_name", ["page_traffic", "page_traffic_rolling", "product_sales",
                                       "funnel", "order_value"])
@pytest.mark.chaos
def test_closed_intervals_converge_to_the_batch_layer(
    spark: SparkSession, speed_run: SpeedRun, view_name: str
) -> None:
    """page_traffic_rolling: hopping windows, an hour every 15 minutes."""
    view = load_views()[view_name]
    batch, realtime = both_layers(spark, speed_run, view)
    if view_name.startswith("page_traffic"):  # dropped as too late by the speed layer only
        # in each (hopping) window it is in: page_traffic's hour, page_traffic_rolling's four
        dropped = {parse_utc(start).replace(tzinfo=None): rows for start, rows in
                   speed_run.status["views"][view_name]["dropped_by_window"].items()}
        assert sum(dropped.values()) == TOO_LATE * view.windows_per_event
        late = {key[0]: batch.pop(key)["views"] for key in list(batch)
                if key[1] == TOO_LATE_PAGE}
        assert late == {start: rows for start, rows in dropped.items()
                        if start >= speed_run.start.replace(tzinfo=None)}
    assert len({key[0] for key in batch}) >= HOURS - 1, "too few closed windows to compare"
    assert realtime.keys() == batch.keys()
    for measure in view.measures:
        pairs = [(batch[k][measure.name], realtime[k][measure.name]) for k in batch]
        if measure.exact_in_speed_layer:
            wrong = [(k, b, r) for k, (b, r) in zip(batch, pairs, strict=True) if b != r]
            assert not wrong, f"{measure.name}: {len(wrong)} of {len(pairs)} differ: {wrong[:5]}"
        elif measure.kind in DOUBLE_KINDS:  # exact sums, rounded at the end: last bits
            wrong = [(k, b, r) for k, (b, r) in zip(batch, pairs, strict=True)
                     if not same_value(measure.kind, b, r, relative=1e-9)]
            assert not wrong, f"{measure.name}: {len(wrong)} of {len(pairs)} differ: {wrong[:5]}"
        elif measure.kind == "approx_percentile":  # a KLL sketch, exact up to k values a key
            assert max(row["orders"] for row in batch.values()) <= view.quantile_sketch_k
            wrong = [(k, b, r) for k, (b, r) in zip(batch, pairs, strict=True) if b != r]
            assert not wrong, f"{measure.name}: {len(wrong)} of {len(pairs)} differ: {wrong[:5]}"
        elif measure.kind == "top_k":  # a frequent-items sketch, exact up to 0.75 x 2^lg values
            assert PRODUCTS <= 0.75 * 2**view.top_k_lg_map_size  # distinct values a key
            wrong = [(k, b, r) for k, (b, r) in zip(batch, pairs, strict=True)
                     if not same_value(measure.kind, b, r)]  # Spark's rows, Arrow's dicts
            assert not wrong, f"{measure.name}: {len(wrong)} of {len(pairs)} differ: {wrong[:5]}"
        else:  # a HyperLogLog sketch: relative standard error within view.approx_distinct_rsd
            outside = [(b, r) for b, r in pairs if abs(r - b) > view.distinct_tolerance(b, 4)]
            assert not outside, f"{measure.name}: beyond 4 rsd (exact, estimate): {outside[:5]}"
            errors = [abs(r - b) / b for b, r in pairs if b]
            assert sum(errors) / len(errors) <= view.approx_distinct_rsd, (
                f"{measure.name}: mean relative error {sum(errors) / len(errors):.4f}")


def test_events_older_than_the_watermark_are_counted_by_each_view_that_reads_them(
    speed_run: SpeedRun,
) -> None:
    """The too-late events are page views: page_traffic, page_traffic_by_segment and funnel
    read them, the product sales and order value views do not. The views share one query
    (one lateness allowance)."""
    dropped = {name: (view["query"], view["dropped_by_watermark_total"])
               for name, view in speed_run.status["views"].items()}
    query = "speed_late_600s"
    assert dropped == {"page_traffic": (query, TOO_LATE), "funnel": (query, TOO_LATE),
                       "page_traffic_by_segment": (query, TOO_LATE),
                       "page_traffic_rolling": (query, TOO_LATE),  # once, in four windows
                       "product_sales": (query, 0), "product_sales_by_category": (query, 0),
                       "order_value": (query, 0)}


def test_every_realtime_row_says_whether_its_window_is_whole(
    spark: SparkSession, speed_run: SpeedRun
) -> None:
    """Served from the speed layer (nothing is published yet), every row of the hour the
    too-late page views belong to says it is not complete and how many rows it lacks, which
    is what its views fall short of the batch layer's; every other closed hour is complete
    and equal to the batch layer's; the hours still open are not complete."""
    view = load_views()["page_traffic"]
    batch, _ = both_layers(spark, speed_run, view)  # the batch layer counts every event
    status = speed_status(speed_run.settings)["views"][view.name]
    assert {parse_utc(start): rows for start, rows in status["dropped_by_window"].items()} == {
        speed_run.start: TOO_LATE}
    watermark = closed_windows(speed_run, view)
    answer = served(SnapshotStore(serving_settings(speed_run), {view.name: view}), view,
                    speed_run.start - timedelta(hours=1), watermark + timedelta(days=1))
    assert {row["source"] for row in answer.values()} == {"realtime"}
    truth = {iso_key(key): measures["views"] for key, measures in batch.items()}
    late_hour, closed, still_open = [], [], []
    for key, row in answer.items():
        if parse_utc(row["window_start"]) == speed_run.start:
            late_hour.append((row["complete"], row["late_rows"]))
        elif parse_utc(row["window_end"]) <= watermark:
            closed.append((row["complete"], row["late_rows"]))
            if key in truth:
                assert row["views"] == truth[key], key
        else:
            still_open.append((row["complete"], row["late_rows"]))
    assert late_hour and set(late_hour) == {(False, TOO_LATE)}
    assert len(closed) >= 2 and set(closed) == {(True, 0)}
    assert still_open and set(still_open) == {(False, 0)}
    in_late_hour = [key for key in answer if parse_utc(key[0]) == speed_run.start]
    assert sum(truth[key] for key in truth if parse_utc(key[0]) == speed_run.start) - sum(
        answer[key]["views"] for key in in_late_hour) == TOO_LATE


def test_a_slice_published_beyond_a_gap_is_served_from_batch_at_once_and_exactly(
    spark: SparkSession, speed_run: SpeedRun, tmp_path: Path
) -> None:
    """As a run triggered for hours after a gap publishes them (here into a copy of the
    lake, so the tests after this one find nothing published): the next snapshot answers
    those hours from the batch layer, every measure exact, while the hour in the gap is
    still the speed layer's and says it lacks the too-late rows."""
    view = load_views()["page_traffic"]
    batch, _ = both_layers(spark, speed_run, view)
    watermark = closed_windows(speed_run, view)
    end = watermark.replace(minute=0, second=0, microsecond=0)
    beyond = speed_run.start + timedelta(hours=1)  # the first hour is left unpublished
    assert end - beyond >= timedelta(hours=1), "no closed hour after the gap"
    copied = serving_settings(speed_run)
    copied.lake.root = str(tmp_path / "lake")
    shutil.copytree(speed_run.settings.lake.root, copied.lake.root,
                    ignore=shutil.ignore_patterns("_staging"))
    store = SnapshotStore(copied, {view.name: view})
    window = (speed_run.start, end)
    before = served(store, view, *window)
    assert {row["source"] for row in before.values()} == {"realtime"}
    publish(copied, [Publication(view.name, beyond, end, current_version(copied, view.name),
                                 0, "run-after-a-gap")])
    store.refresh()
    answer = served(store, view, *window)
    expected = {iso_key(key): measures for key, measures in batch.items()
                if beyond.replace(tzinfo=None) <= key[0] < end.replace(tzinfo=None)}
    published = {key: row for key, row in answer.items() if parse_utc(key[0]) >= beyond}
    assert published.keys() == expected.keys() and expected
    for key, row in published.items():
        assert (row["source"], row["complete"], row["late_rows"]) == ("batch", True, 0), key
        assert {m: row[m] for m in expected[key]} == {
            m: json_value(v) for m, v in expected[key].items()}, key
    gap = [row for key, row in answer.items() if parse_utc(key[0]) < beyond]
    assert gap and {(r["source"], r["complete"], r["late_rows"]) for r in gap} == {
        ("realtime", False, TOO_LATE)}
    assert store.get(view.name).batch_beyond_mark == ((beyond, end),)


def test_the_status_reports_each_query(speed_run: SpeedRun) -> None:
    """Each query of each shard: with shards, every partition is some shard's, and the
    speed layer's watermark is its slowest shard's."""
    for name, view in speed_run.status["views"].items():
        assert view["active"] is True, name
        assert view["lag"] == 0 and set(view["lag_per_partition"]) == set(view["end_offsets"])
        assert view["watermark"] > speed_run.start.isoformat()[:19], name
        assert view["state_rows"] > 0, name
        assert view["batch_timestamp"] and view["processed_rows_per_second"] is not None
        partitions = speed_run.settings.kafka.events_topic.partitions
        assert len(view["end_offsets"]) == partitions, name
        if speed_run.shards > 1:
            own = {app: entry["watermark"] for app, entry in view["shards"].items()}
            assert sorted(own) == ["speed-0", "speed-1"] and view["watermark"] == min(
                own.values()), name


def test_the_realtime_gate_passes_on_every_row_the_speed_layer_wrote(speed_run: SpeedRun) -> None:
    for view in load_views().values():
        table = DeltaTable(speed_run.settings.table_path(realtime_table(view)))
        written = table.to_pyarrow_dataset().count_rows()
        result = validate_realtime(speed_run.settings, view, max_rows=written)
        assert result is not None and result.success, result and result.report()
        assert result.rows == written
        assert result.evaluated == len(realtime_suite(view).expectations)
        assert validate_realtime(speed_run.settings, view) is None, "gated twice"


# --- serving: both real layers merged at the batch high-water mark ----------------------


def serving_settings(run: SpeedRun) -> Settings:
    """The run's lake, with the schedule starting on the day of the run's first events (its
    late events reach back 3 minutes before its start: the day before, when it started at
    midnight) and no retire margin."""
    settings = run.settings.model_copy(deep=True)
    settings.batch.start_date = (run.start - timedelta(hours=1)).date()
    settings.serving.retire_margin_seconds = 0
    return settings


def publish_until(settings: Settings, view: ViewDefinition, mark: datetime) -> None:
    """Publish every hour from the first day's midnight to ``mark``, one commit per hour."""
    hour = datetime.combine(settings.batch.first_day, datetime.min.time(), tzinfo=UTC)
    while hour < mark:
        publish(settings, [Publication(view.name, hour, hour + timedelta(hours=1),
                                       current_version(settings, view.name), 0, "serving-test")])
        hour += timedelta(hours=1)


def answered(store: SnapshotStore, view: ViewDefinition, start: datetime, end: datetime
             ) -> list[dict[str, Any]]:
    """Every row the serving layer answers for windows starting in [start, end), page by
    page, as answered (a key answered twice is there twice)."""
    rows, offset = [], 0
    while offset is not None:
        query = parse_query({view.name: view}, view.name, start=start.isoformat(),
                            end=end.isoformat(), limit=1000, offset=offset)
        result = run_query(store.get(view.name), query)
        rows += result.rows
        offset = result.next_offset
    return rows


def served(store: SnapshotStore, view: ViewDefinition, start: datetime, end: datetime
           ) -> dict[tuple, dict[str, Any]]:
    """``answered``'s rows by key; each key answered once."""
    rows = answered(store, view, start, end)
    keyed = {tuple(row[k] for k in view.key): row for row in rows}
    assert len(keyed) == len(rows), f"{len(rows) - len(keyed)} keys were answered twice"
    return keyed


def iso_key(key: tuple) -> tuple:
    return tuple(json_value(part.replace(tzinfo=UTC) if isinstance(part, datetime) else part)
                 for part in key)


def test_queries_during_publishes_never_count_an_interval_twice_or_drop_one(
    spark: SparkSession, speed_run: SpeedRun
) -> None:
    view = load_views()["product_sales"]  # no late drops: both layers agree on every window
    batch, _ = both_layers(spark, speed_run, view)
    expected_orders = sum(measures["orders"] for measures in batch.values())
    settings = serving_settings(speed_run)
    end = closed_windows(speed_run, view).replace(minute=0, second=0, microsecond=0)
    store = SnapshotStore(settings, {view.name: view})
    publishing = threading.Event()
    publishing.set()

    def read_while_publishing() -> list[tuple[str, int, int]]:
        """(mark, total orders, keys answered twice) of each answer, all rows counted."""
        seen: list[tuple[str, int, int]] = []
        while publishing.is_set() or len(seen) < 5:
            store.refresh()
            rows = answered(store, view, speed_run.start, end)
            keys = [tuple(row[k] for k in view.key) for row in rows]
            seen.append((store.get(view.name).high_water_mark.isoformat(),
                         sum(row["orders"] for row in rows), len(keys) - len(set(keys))))
        return seen

    reader = Background(read_while_publishing, "reader")
    try:
        publish_until(settings, view, speed_run.start + timedelta(hours=2))
    finally:
        publishing.clear()
    seen = reader.result(timeout=120)
    marks = sorted({mark for mark, _, _ in seen})
    assert len(marks) >= 2, f"the reader saw only the marks {marks}"
    wrong = [answer for answer in seen if answer[1:] != (expected_orders, 0)]
    assert not wrong, (f"{len(wrong)} of {len(seen)} answers != {expected_orders} orders with "
                       f"no key twice (mark, orders, keys twice): {wrong[:5]}")


@pytest.mark.parametrize("view_name", ["page_traffic", "product_sales", "funnel"])
def test_serving_answers_batch_before_the_mark_and_realtime_after_it_through_retirement(
    spark: SparkSession, speed_run: SpeedRun, view_name: str
) -> None:
    view = load_views()[view_name]
    batch, realtime = both_layers(spark, speed_run, view)
    settings = serving_settings(speed_run)
    midnight = datetime.combine(settings.batch.first_day, datetime.min.time(), tzinfo=UTC)
    # the hours before the run hold late events too: compute every hour that is published
    if midnight < speed_run.start:
        stage_and_promote(spark, settings, [view], midnight, speed_run.start, "serving-test")
    mark = speed_run.start + timedelta(hours=2)
    publish_until(settings, view, mark)
    end = closed_windows(speed_run, view).replace(minute=0, second=0, microsecond=0)
    answer = served(SnapshotStore(settings, {view.name: view}), view, speed_run.start, end)

    expected = {iso_key(k): ("batch", v) for k, v in batch.items() if k[0] < mark.replace(tzinfo=None)}
    expected |= {iso_key(k): ("realtime", v) for k, v in realtime.items()
                 if k[0] >= mark.replace(tzinfo=None)}
    assert answer.keys() == expected.keys()
    for key, (source, measures) in expected.items():
        assert answer[key]["source"] == source, key
        assert {m: answer[key][m] for m in measures} == {
            m: json_value(v) for m, v in measures.items()}, key

    held = [r for r in current_rows(settings, view).to_pylist() if r["window_start"] < mark]
    report = maintain(settings, view)
    assert report.gate.success, report.gate.report()
    assert report.windows_compared == len({r["window_start"] for r in held}) >= 2, report.summary()
    assert report.rows_retired == len(held), report.summary()  # collapsed: one row per key
    retired = [r for r in current_rows(settings, view).to_pylist() if r["window_end"] <= mark]
    assert retired == []
    after = served(SnapshotStore(settings, {view.name: view}), view, speed_run.start, end)
    assert after == answer, "retiring real-time rows the batch layer covers changed an answer"
