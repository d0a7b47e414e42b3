"""Hopping windows in both layers: an hour every 15 minutes, each purchase in four windows.
The batch layer's Spark aggregation and the speed layer's partials (micro-batches of random
sizes, combined in a shuffled order) both answer every window as plain Python finds the
purchases in it (``tests.support.hopping``: by what a window is, not by how a layer assigns
events to windows); and a batch slice holds exactly the windows that start in it, reading
the events after its end that those windows reach."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from lambdalake.batch.recompute import aggregate_enriched
from lambdalake.settings import Settings
from lambdalake.speed.partials import with_estimates
from lambdalake.views.aggregate import aggregate
from lambdalake.views.definition import ViewDefinition
from tests.support.ground_truth import same_value
from tests.support.hopping import HOPPING, hopping_truth
from tests.support.micro_batches import merged_partials

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)  # fixed date: no Kafka, no clock, no age check
SCHEMA = pa.schema([
    ("event_id", pa.string()), ("event_type", pa.string()),
    ("occurred_at", pa.timestamp("us", tz="UTC")), ("currency", pa.string()),
    ("amount", pa.decimal128(18, 2)), ("quantity", pa.int64()),
])


def purchases(seed: int, count: int) -> list[dict[str, Any]]:
    """Purchases (and some page views, which the view does not read) over three hours,
    some exactly on a window's boundary, a few without an amount or a currency."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        at = HOUR + timedelta(seconds=rng.randrange(3 * 3600))
        if rng.random() < 0.05:
            at = at.replace(minute=15 * rng.randrange(4), second=0)
        rows.append({
            "event_id": f"e{i}", "event_type": rng.choice(["purchase"] * 9 + ["page_view"]),
            "occurred_at": at, "currency": None if rng.random() < 0.05 else rng.choice(["EUR", "USD"]),
            "amount": None if rng.random() < 0.05 else Decimal(rng.randrange(100, 50_000)) / 100,
            "quantity": rng.randint(1, 5)})
    return rows


def key_of(row: dict[str, Any]) -> tuple[datetime, str | None]:
    start = pd.Timestamp(row["window_start"])
    start = start.tz_convert("UTC") if start.tzinfo else start.tz_localize("UTC")
    return start.to_pydatetime(), row["currency"]


def agree(truth: dict, answer: dict, view: ViewDefinition, layer: str) -> None:
    kinds = {m.name: m.kind for m in view.measures}
    assert answer.keys() == truth.keys(), layer
    for key, want in truth.items():
        for name, value in want.items():
            assert same_value(kinds[name], value, answer[key][name]), (
                layer, key, name, value, answer[key][name])


def test_both_layers_answer_every_hopping_window_as_the_events_in_it(spark: SparkSession) -> None:
    view = ViewDefinition.model_validate(HOPPING)
    rows = purchases(7, 3_000)
    frame = spark.createDataFrame(pa.Table.from_pylist(rows, SCHEMA).to_pandas())
    batch = {key_of(r): r for r in (row.asDict() for row in aggregate(frame, view).collect())}
    speed = {key_of(r): r for r in with_estimates(
        merged_partials(rows, SCHEMA, view, seed=7, largest=400), view).to_pylist()}
    truth = hopping_truth(rows, HOUR - timedelta(minutes=45), HOUR + timedelta(hours=3))
    assert len({start for start, _ in truth}) == 15  # 09:15 .. 12:45: four hops into each hour
    agree(truth, batch, view, "batch")
    agree(truth, speed, view, "speed")
    assert all(row["window_end"] - row["window_start"] == timedelta(hours=1)
               for row in batch.values())


def test_a_batch_slice_holds_the_windows_starting_in_it_with_every_event_they_reach(
    spark: SparkSession, settings: Settings,
) -> None:
    view = ViewDefinition.model_validate(HOPPING)
    rows = purchases(8, 2_000)
    frame = spark.createDataFrame(pa.Table.from_pylist(rows, SCHEMA).to_pandas())
    sliced: dict = {}
    for hour in range(3):
        start = HOUR + timedelta(hours=hour)
        answer = {key_of(r): r for r in (row.asDict() for row in aggregate_enriched(
            spark, settings, frame, view, (start, start + timedelta(hours=1))).collect())}
        assert {key[0] for key in answer} == {start + timedelta(minutes=m) for m in (0, 15, 30, 45)}
        assert not sliced.keys() & answer.keys()
        sliced |= answer
    # the windows from 12:15 on reach events after the last slice's end: none here, so the
    # truth of [10:00, 13:00) is what the slices hold
    agree(hopping_truth(rows, HOUR, HOUR + timedelta(hours=3)), sliced, view, "slices")
    later = [row for row in rows if row["occurred_at"] < HOUR + timedelta(hours=1, minutes=30)]
    first = {key_of(r): r for r in (row.asDict() for row in aggregate_enriched(
        spark, settings, spark.createDataFrame(pa.Table.from_pylist(later, SCHEMA).to_pandas()),
        view, (HOUR, HOUR + timedelta(hours=1))).collect())}
    assert first != {key: sliced[key] for key in first}, "the 10:45 window reads past 11:00"
    agree(hopping_truth(later, HOUR, HOUR + timedelta(hours=1)), first, view, "first slice")
