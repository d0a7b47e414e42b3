"""``top_k`` in both layers: the batch layer's Spark aggregation (its own, joined to the
view's rows by key) and the speed layer's frequent-items sketches (over micro-batches of
any size, combined in a shuffled order) answer every key as a plain count of the events
does: exactly while a key's distinct values fit the sketch, within the stated error and
agreeing under reconciliation's rule beyond it. Keys include a NULL dimension, values
NULLs, counts ties and a measure filter leaves every value of a measure out."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
import pytest

from lambdalake.speed.partials import with_estimates
from lambdalake.views.aggregate import aggregate
from lambdalake.views.definition import ViewDefinition
from tests.support.ground_truth import same_value, top_k_admits, top_k_truth
from tests.support.micro_batches import merged_partials

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)  # fixed date: no Kafka, no clock, no age check
SCHEMA = pa.schema([
    ("event_id", pa.string()), ("event_type", pa.string()),
    ("occurred_at", pa.timestamp("us", tz="UTC")), ("currency", pa.string()),
    ("product_id", pa.string()), ("quantity", pa.int64()),
])
DEFINITION = {
    "name": "top", "description": "top_k in every shape", "event_types": ["purchase"],
    "grain": "1 hour", "lateness": "10 minutes",
    "columns": {"size": "CASE WHEN quantity >= 4 THEN 'bulk' END"},  # NULL for most
    "dimensions": ["currency", "size"],
    "measures": [
        {"name": "orders", "kind": "count"},
        {"name": "top_products", "kind": "top_k", "column": "product_id", "k": 5},
        {"name": "top_pairs", "kind": "top_k", "column": "product_id", "k": 2,
         "filter": "quantity >= 2"},
        {"name": "top_of_nothing", "kind": "top_k", "column": "product_id", "k": 3,
         "filter": "quantity > 100"},
    ],
}
FILTERS = {"top_products": lambda event: True, "top_pairs": lambda event: event["quantity"] >= 2,
           "top_of_nothing": lambda event: event["quantity"] > 100}
"""Each top-k measure's filter, in Python."""


def events(seed: int, count: int, products: int) -> list[dict[str, Any]]:
    """Purchases over three hours; products falling off like 1/rank (ties in the tail), a
    tenth without one."""
    rng = random.Random(seed)
    weights = [1 / rank for rank in range(1, products + 1)]
    return [{
        "event_id": f"e{i}", "event_type": "purchase",
        "occurred_at": HOUR + timedelta(seconds=rng.randrange(3 * 3600)),
        "currency": rng.choice(["EUR", "USD"]),
        "product_id": None if rng.random() < 0.1 else f"p{rng.choices(range(products), weights)[0]}",
        "quantity": rng.randint(1, 5),
    } for i in range(count)]


def key_of(row: dict[str, Any]) -> tuple[Any, ...]:
    start = pd.Timestamp(row["window_start"])
    start = start.tz_convert("UTC") if start.tzinfo else start.tz_localize("UTC")
    return (start.to_pydatetime(), row["currency"], row["size"])


def truth(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Counter[str]]]:
    """Per key, each top-k measure's counts of values: the events grouped in plain Python."""
    grouped: dict[tuple[Any, ...], dict[str, Counter[str]]] = defaultdict(
        lambda: {name: Counter() for name in FILTERS})
    for event in rows:
        at = event["occurred_at"]
        key = (at.replace(minute=0, second=0, microsecond=0), event["currency"],
               "bulk" if event["quantity"] >= 4 else None)
        measures = grouped[key]  # every measure has the key, counted or not
        for name, counted in FILTERS.items():
            if counted(event) and event["product_id"] is not None:
                measures[name][event["product_id"]] += 1
    return grouped


def both_layers(spark: SparkSession, view: ViewDefinition, rows: list[dict[str, Any]],
                seed: int) -> tuple[dict, dict, pa.Table]:
    """Batch's rows and the speed layer's by key, and the speed layer's merged partials:
    micro-batches of random sizes, their partials combined in a shuffled order."""
    frame = spark.createDataFrame(pa.Table.from_pylist(rows, SCHEMA).to_pandas())
    batch = {key_of(row): row for row in
             (r.asDict() for r in aggregate(frame, view).collect())}
    merged = merged_partials(rows, SCHEMA, view, seed, largest=300)
    speed = {key_of(row): row for row in with_estimates(merged, view).to_pylist()}
    return batch, speed, merged


@pytest.mark.parametrize("seed", [1, 2])
def test_both_layers_answer_the_exact_top_k_while_the_sketch_counts_every_value(
    spark: SparkSession, seed: int
) -> None:
    view = ViewDefinition.model_validate(DEFINITION)
    rows = events(seed, 2_000, 60)  # 60 products: under the 768 a map of 2^10 counts exactly
    batch, speed, _ = both_layers(spark, view, rows, seed)
    counts = truth(rows)
    assert batch.keys() == speed.keys() == counts.keys()
    assert any(key[2] is None for key in counts) and len(counts) == 12  # NULL size: a key
    for key, measures in counts.items():
        for name, counted in measures.items():
            k = next(m.k for m in view.measures if m.name == name)
            want = top_k_truth(pd.Series(list(counted.elements()), dtype=object), k)
            for layer, answer in (("batch", batch[key][name]), ("speed", speed[key][name])):
                assert same_value("top_k", want, answer), (layer, key, name, answer, want)
        assert batch[key]["orders"] == speed[key]["orders"]
    tied = [c["count"] for row in batch.values() for c in row["top_products"]]
    assert len(tied) > len(set(tied))  # equal counts: the value decided the order
    assert all(row["top_of_nothing"] == [] for row in (*batch.values(), *speed.values()))
    alone = ViewDefinition.model_validate({**DEFINITION, "measures": DEFINITION["measures"][1:2]})
    frame = spark.createDataFrame(pa.Table.from_pylist(rows, SCHEMA).to_pandas())
    only = {key_of(row): row["top_products"] for row in
            (r.asDict() for r in aggregate(frame, alone).collect())}
    assert only == {key: row["top_products"] for key, row in batch.items()}  # no other measure


def test_beyond_the_sketch_the_speed_layer_is_within_its_stated_error_and_reconciles(
    spark: SparkSession,
) -> None:
    """A map of 2^4 counters (12 tracked) for 300 products: the speed layer estimates; each
    answer is within 3.5 / 16 of the key's values counted, and reconciliation's rule, given
    the batch layer's exact answer, agrees with it."""
    view = ViewDefinition.model_validate({**DEFINITION, "top_k_lg_map_size": 4})
    rows = events(3, 6_000, 300)
    batch, speed, merged = both_layers(spark, view, rows, 3)
    partials = {key_of(row): row for row in merged.to_pylist()}
    counts = truth(rows)
    assert batch.keys() == speed.keys() == counts.keys()
    estimated = 0
    for key, measures in counts.items():
        for measure in view.measures[1:]:
            counted = measures[measure.name]
            want = top_k_truth(pd.Series(list(counted.elements()), dtype=object), measure.k)
            assert same_value("top_k", want, batch[key][measure.name]), (key, measure.name)
            answer = speed[key][measure.name]
            assert top_k_admits(counted, answer, measure.k, 3.5 / 16), (key, measure.name)
            batch_value = [{"value": c["value"], "count": c["count"]}
                           for c in batch[key][measure.name]]
            assert measure.measure_kind.reconciles(
                view, measure, batch_value, answer, partials[key][measure.name], 4.0), (
                key, measure.name, batch_value, answer)
            estimated += not same_value("top_k", want, answer)
    assert estimated >= 5, "the sketch estimated too few answers for this test to mean much"
