"""``first``, ``last``, ``first_k`` and ``last_k`` in both layers: the batch layer's Spark
aggregate and the speed layer's partials (combined over micro-batches of any size) answer
every key alike, and as a plain sort of the events does, on events where many share an
instant (ties broken by Kafka timestamp, then partition and offset), some values are null
and a measure filter leaves others out."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
import pytest

from lambdalake.speed.partials import with_estimates
from lambdalake.views.aggregate import aggregate
from lambdalake.views.definition import ViewDefinition
from tests.support.ground_truth import expected_view, row_key, same_value
from tests.support.micro_batches import merged_partials

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)  # fixed date: no Kafka, no clock, no age check
SCHEMA = pa.schema([
    ("event_id", pa.string()), ("event_type", pa.string()),
    ("occurred_at", pa.timestamp("us", tz="UTC")), ("currency", pa.string()),
    ("product_id", pa.string()), ("quantity", pa.int64()), ("amount", pa.decimal128(18, 2)),
    ("kafka_timestamp", pa.timestamp("us", tz="UTC")), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()),
])
VIEW = ViewDefinition.model_validate({
    "name": "ordered", "description": "every ordered kind", "event_types": ["purchase"],
    "grain": "1 hour", "lateness": "10 minutes", "dimensions": ["currency"],
    "measures": [
        {"name": "first_product", "kind": "first", "column": "product_id"},
        {"name": "last_amount", "kind": "last", "column": "amount"},
        {"name": "oldest_products", "kind": "first_k", "column": "product_id", "k": 4},
        {"name": "newest_amounts", "kind": "last_k", "column": "amount", "k": 3},
        {"name": "newest_bulk", "kind": "last_k", "column": "product_id", "k": 2,
         "filter": "quantity >= 3"},
        {"name": "last_of_nothing", "kind": "last", "column": "amount",
         "filter": "quantity > 100"},
    ],
})


def events(seed: int, count: int) -> list[dict[str, Any]]:
    """Purchases over three hours at only 40 instants, so most share their instant with
    others; Kafka timestamps a few apart; a tenth without a product."""
    rng = random.Random(seed)
    instants = [HOUR + timedelta(seconds=rng.randrange(3 * 3600)) for _ in range(40)]
    rows = []
    for offset in range(count):
        rows.append({
            "event_id": f"e{offset}", "event_type": "purchase",
            "occurred_at": rng.choice(instants), "currency": rng.choice(["EUR", "USD"]),
            "product_id": None if rng.random() < 0.1 else f"p{rng.randrange(50)}",
            "quantity": rng.randint(1, 5),
            "amount": Decimal(rng.randint(100, 99999)) / 100,
            "kafka_timestamp": HOUR + timedelta(hours=4, milliseconds=rng.randrange(3)),
            "topic": "events", "partition": rng.randrange(3), "offset": offset,
        })
    return rows


def speed_answer(rows: list[dict[str, Any]], seed: int) -> dict[tuple[Any, ...], dict]:
    """The speed layer's answer: micro-batches of random sizes, their partials combined in
    a shuffled order, as the real-time table and the serving step combine them."""
    merged = with_estimates(merged_partials(rows, SCHEMA, VIEW, seed, largest=120), VIEW)
    return {row_key(VIEW, row): row for row in merged.to_pylist()}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_both_layers_pick_the_same_values_in_event_then_kafka_order(
    spark: SparkSession, seed: int
) -> None:
    rows = events(seed, 1500)
    frame = spark.createDataFrame(pa.Table.from_pylist(rows, SCHEMA).to_pandas())
    batch = {row_key(VIEW, row): row for row in
             (r.asDict() for r in aggregate(frame, VIEW).collect())}
    speed = speed_answer(rows, seed)
    truth_frame = pd.DataFrame(rows).assign(
        occurred_at=lambda f: pd.to_datetime(f["occurred_at"], utc=True).dt.tz_localize(None))
    truth = {row_key(VIEW, row): row for row in expected_view(
        truth_frame, VIEW, HOUR, HOUR + timedelta(hours=3)).to_dict("records")}
    assert batch.keys() == speed.keys() == truth.keys() and len(truth) == 6
    for key, want in truth.items():
        for measure in VIEW.measures:
            got = {"batch": batch[key][measure.name], "speed": speed[key][measure.name]}
            for layer, answer in got.items():
                assert same_value(measure.kind, want[measure.name], answer), (
                    layer, key, measure.name, answer, want[measure.name])
    shared = truth_frame.groupby("occurred_at").size()
    assert (shared > 1).all()  # every instant is tied: Kafka order decided each pick
    assert all(row["last_of_nothing"] is None and len(row["newest_amounts"]) == 3
               for row in (*batch.values(), *speed.values()))
