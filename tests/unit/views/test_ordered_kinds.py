"""The ordered kinds (``first``, ``last``, ``first_k``, ``last_k``) on their own: partials
combine in any grouping and order to a sort of all values; definitions that give them the
wrong parameters are refused; reconciliation compares their values as they are (text and
lists too), and the API answers lists with JSON's types."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from lambdalake.quality.suites.view import view_suite
from lambdalake.serving.api import describe_view
from lambdalake.serving.maintenance import judge
from lambdalake.serving.query import json_columns
from lambdalake.views.definition import Measure, ViewDefinition, load_views
from lambdalake.views.measures import MEASURE_KINDS, ORDER

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)
ORDERED = {"first": (False, 1), "last": (True, 1), "first_k": (False, 4), "last_k": (True, 4)}
"""Each ordered kind: newest first?, and how many values it keeps (k = 4 for the lists)."""


class Unused:
    """What a kind's partials do not read of the view; the measure gives only ``k``."""

    k = 4


def placed(rng: random.Random, index: int) -> dict[str, Any] | None:
    """A value with its event's place; a tenth are null (no value), many instants tie."""
    if rng.random() < 0.1:
        return None
    return {"at": HOUR + timedelta(seconds=rng.randrange(30)),
            "kafka_timestamp": HOUR + timedelta(milliseconds=rng.randrange(2)),
            "topic": "events", "partition": rng.randrange(3), "offset": index,
            "value": f"v{index}"}


@pytest.mark.parametrize("kind", sorted(ORDERED))
def test_partials_combine_in_any_grouping_and_order_to_a_sort_of_all_values(kind: str) -> None:
    """Associative, commutative, with the empty partial as identity."""
    measure_kind, (newest, keep) = MEASURE_KINDS[kind], ORDERED[kind]
    rng = random.Random(7)
    values = [placed(rng, i) for i in range(2_000)]
    ranked = sorted((v for v in values if v is not None),
                    key=lambda v: tuple(v[f] for f in ORDER), reverse=newest)
    truth = [v["value"] for v in ranked[:keep]]
    cuts = sorted(rng.sample(range(1, len(values)), 30))
    partials = [measure_kind.sketch(values[a:b], Unused(), Unused())
                for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True)]
    partials += [measure_kind.sketch([], Unused(), Unused()),
                 measure_kind.sketch([None], Unused(), Unused())]
    for _ in range(5):
        rng.shuffle(partials)
        middle = rng.randrange(1, len(partials))
        grouped = measure_kind.union([measure_kind.union(partials[:middle], Unused(), Unused()),
                                      measure_kind.union(partials[middle:], Unused(), Unused())],
                                     Unused(), Unused())
        answer = measure_kind.final(grouped, Unused(), Unused())
        assert (answer if keep > 1 else [answer]) == truth, kind
    empty = measure_kind.final(measure_kind.sketch([None], Unused(), Unused()), Unused(), Unused())
    assert empty == ([] if keep > 1 else None)  # as Spark answers a group without a value


@pytest.mark.parametrize(("measure", "problem"), [
    ({"name": "m", "kind": "last_k", "column": "amount"}, "last_k needs a k from 1 to 100"),
    ({"name": "m", "kind": "first_k", "column": "amount", "k": 0}, "needs a k from 1 to 100"),
    ({"name": "m", "kind": "first_k", "column": "amount", "k": 101}, "needs a k from 1 to 100"),
    ({"name": "m", "kind": "last", "column": "amount", "k": 3}, "last takes no k"),
    ({"name": "m", "kind": "sum", "column": "amount", "k": 3}, "sum takes no k"),
    ({"name": "m", "kind": "approx_percentile", "column": "amount", "percentile": 0.5, "k": 3},
     "approx_percentile takes no k"),
    ({"name": "m", "kind": "first", "column": "amount", "percentile": 0.5},
     "first takes no percentile"),
    ({"name": "m", "kind": "first"}, "first needs a column"),
])
def test_an_ordered_measure_with_the_wrong_parameters_is_refused(measure: dict,
                                                                  problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Measure.model_validate(measure)


@pytest.fixture(scope="module")
def order_value() -> ViewDefinition:
    return load_views()["order_value"]


def drift_row(view: ViewDefinition, batch: dict[str, Any], realtime: dict[str, Any]
              ) -> dict[str, Any]:
    """A key both layers hold, equal in every measure but those given."""
    same = {f"{prefix}_{m.name}": None for m in view.measures for prefix in "br"}
    return {**same, **{f"b_{k}": v for k, v in batch.items()},
            **{f"r_{k}": v for k, v in realtime.items()}, "window_start": HOUR,
            "dimensions": '{"currency":"EUR","band":"small"}'}


def test_reconciliation_compares_text_and_lists_as_they_are(order_value: ViewDefinition) -> None:
    agreeing = drift_row(order_value, {"first_product": "p1", "latest_products": ["p3", "p2"],
                                       "last_amount": Decimal("12.50")},
                         {"first_product": "p1", "latest_products": ["p3", "p2"],
                          "last_amount": Decimal("12.50")})
    assert judge(order_value, [agreeing], 0, 4.0, HOUR) == []
    differing = drift_row(order_value, {"first_product": "p1", "latest_products": ["p3", "p2"],
                                        "last_amount": Decimal("12.50")},
                          {"first_product": "p9", "latest_products": ["p2", "p3"],
                           "last_amount": Decimal("13.00")})
    drifts = {d["measure"]: d for d in judge(order_value, [differing], 0, 4.0, HOUR)}
    assert sorted(drifts) == ["first_product", "last_amount", "latest_products"]
    assert all(d["severity"] == "critical" for d in drifts.values())
    text = drifts["first_product"]
    assert (text["batch_text"], text["realtime_text"], text["batch_value"]) == (
        '"p1"', '"p9"', None)
    assert math.isnan(text["absolute_drift"])
    assert json.loads(drifts["latest_products"]["realtime_text"]) == ["p2", "p3"]
    number = drifts["last_amount"]
    assert (number["absolute_drift"], number["batch_text"]) == (0.5, None)
    late = judge(order_value, [differing], 3, 4.0, HOUR)  # events dropped as too late
    assert {d["severity"] for d in late} == {"warning"}


def test_the_api_answers_lists_of_decimals_and_instants_as_json_types() -> None:
    page = pa.table({
        "amounts": pa.array([[Decimal("1.50"), None], [], None], pa.list_(pa.decimal128(18, 2))),
        "times": pa.array([[HOUR], [HOUR + timedelta(seconds=1)], None],
                          pa.list_(pa.timestamp("us", tz="UTC"))),
    }).slice(0, 3)
    assert json_columns(page).to_pylist() == [
        {"amounts": ["1.50", None], "times": ["2026-11-20T10:00:00.000Z"]},
        {"amounts": [], "times": ["2026-11-20T10:00:01.000Z"]},
        {"amounts": None, "times": None}]


def test_first_and_last_are_bounded_like_their_column_and_lists_are_not(
    order_value: ViewDefinition,
) -> None:
    checks = {e.meta["check"]: e for e in view_suite(order_value).expectations}
    last = checks["range:last_amount"]
    assert (last.min_value, last.max_value) == (0, 1_000_000)  # amount's contract
    assert "range:latest_products" not in checks and "range:first_product" not in checks
    assert "not_null:last_amount" not in checks
    described = {m["name"]: m for m in describe_view(order_value)["measures"]}
    assert described["latest_products"]["k"] == 3
    assert described["last_amount"]["exact_in_speed_layer"] is True
