"""The measure kinds, and the percentile kind end to end on Arrow: definition, micro-batch
partials, their combination, the value a query shows, the suites' bounds and the serving
reconciliation."""

from __future__ import annotations

import math
import random
import statistics
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pyarrow as pa
import pytest
from datasketches import kll_doubles_sketch

from lambdalake.quality.suites.view import view_suite
from lambdalake.serving.api import describe_view
from lambdalake.serving.maintenance import judge
from lambdalake.speed.partials import merge_partials, partials_of, with_estimates
from lambdalake.views.definition import Measure, ViewDefinition, load_views
from lambdalake.views.measures import MEASURE_KINDS, RELATIVE_ERROR
from tests.support.ground_truth import percentile_disc, rank_admits

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)


@pytest.fixture(scope="module")
def product_sales() -> ViewDefinition:
    return load_views()["product_sales"]


def purchases(amounts: list[Decimal], product: str = "p1") -> pa.Table:
    """A micro-batch of purchases of one product in one hour, as the speed layer collects it."""
    count = len(amounts)
    return pa.table({
        "event_type": ["purchase"] * count,
        "occurred_at": pa.array([HOUR + timedelta(seconds=i % 3600) for i in range(count)],
                                pa.timestamp("us", tz="UTC")),
        "product_id": [product] * count, "currency": ["EUR"] * count,
        "quantity": pa.array([1] * count, pa.int64()),
        "amount": pa.array(amounts, pa.decimal128(18, 2)),
    })


def test_every_kind_is_registered_under_its_own_name() -> None:
    assert set(MEASURE_KINDS) == {"count", "sum", "min", "max", "distinct_count",
                                  "approx_percentile", "avg", "variance", "stddev", "first",
                                  "last", "first_k", "last_k", "top_k"}
    assert all(kind.name == name for name, kind in MEASURE_KINDS.items())


@pytest.mark.parametrize(("measure", "problem"), [
    ({"name": "m", "kind": "median"}, "kind 'median' is none of"),
    ({"name": "m", "kind": "approx_percentile", "column": "amount"}, "needs a percentile"),
    ({"name": "m", "kind": "approx_percentile", "column": "amount", "percentile": 1.0},
     "needs a percentile in (0, 1)"),
    ({"name": "m", "kind": "sum", "column": "amount", "percentile": 0.5},
     "sum takes no percentile"),
])
def test_a_measure_that_does_not_fit_its_kind_is_refused(measure: dict, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        Measure.model_validate(measure)


def test_a_percentile_of_a_text_column_is_refused(product_sales: ViewDefinition) -> None:
    from lambdalake.contracts.registry import ContractRegistry
    from lambdalake.views.definition import ViewError

    bad = product_sales.model_copy(update={"measures": [Measure(
        name="m", kind="approx_percentile", column="product_id", percentile=0.5)]})
    with pytest.raises(ViewError, match="approx_percentile of STRING column 'product_id'"):
        bad.check_against(ContractRegistry())


def test_percentile_partials_combine_to_an_answer_within_the_rank_error(
    product_sales: ViewDefinition,
) -> None:
    """50,000 order values in 20 micro-batches: far beyond the sketch's k, so the answer is an
    estimate; its rank is within the stated error of the percentile."""
    generator = random.Random(7)
    amounts = [Decimal(generator.lognormvariate(3, 1)).quantize(Decimal("0.01"))
               for _ in range(50_000)]
    partials = pa.concat_tables(partials_of(purchases(amounts[i:i + 2_500]), product_sales)
                                for i in range(0, len(amounts), 2_500))
    merged = merge_partials(partials, product_sales)
    (row,) = with_estimates(merged, product_sales).to_pylist()
    error = product_sales.quantile_rank_error
    assert 0.005 < error < 0.02
    for name, percentile in (("median_order", 0.5), ("p95_order", 0.95)):
        # estimated, not exact: the sketch kept a fraction of the values (it may still hit
        # the exact percentile; comparing with it made this test fail now and then)
        sketch = kll_doubles_sketch.deserialize(merged.column(name)[0].as_py())
        assert sketch.is_estimation_mode() and sketch.num_retained < len(amounts) / 20
        assert rank_admits(amounts, row[name], percentile, error), (name, row[name])
    assert row["orders"] == 50_000


def test_a_percentile_of_up_to_k_values_is_exact(product_sales: ViewDefinition) -> None:
    amounts = [Decimal(f"{value}.50") for value in (9, 1, 7, 3, 5, 3, 8)]
    halves = [partials_of(purchases(amounts[:3]), product_sales),
              partials_of(purchases(amounts[3:]), product_sales)]
    (row,) = with_estimates(merge_partials(pa.concat_tables(halves), product_sales),
                            product_sales).to_pylist()
    assert row["median_order"] == float(percentile_disc(amounts, 0.5)) == 5.5
    assert row["p95_order"] == 9.5


def test_reconciliation_judges_a_percentile_by_its_rank_in_the_sketch(
    product_sales: ViewDefinition,
) -> None:
    amounts = [Decimal(value) for value in range(1, 1001)]
    merged = merge_partials(partials_of(purchases(amounts), product_sales), product_sales)
    (partial,), (estimated,) = merged.to_pylist(), with_estimates(merged, product_sales).to_pylist()

    def row(batch_median: float) -> dict:
        values = {f"{prefix}_{m.name}": 0 for m in product_sales.measures for prefix in "br"}
        return {**values, "window_start": HOUR, "dimensions": '{"product_id":"p1"}',
                "b_median_order": batch_median, "r_median_order": estimated["median_order"],
                "b_p95_order": 950.0, "r_p95_order": estimated["p95_order"],
                "p_median_order": partial["median_order"], "p_p95_order": partial["p95_order"]}

    assert judge(product_sales, [row(500.0)], 0, 4.0, HOUR) == []
    (drift,) = judge(product_sales, [row(600.0)], 0, 4.0, HOUR)  # rank 0.6, not 0.5
    assert (drift["measure"], drift["severity"]) == ("median_order", "critical")


def test_percentiles_are_bounded_like_their_column_and_described_with_their_error(
    product_sales: ViewDefinition,
) -> None:
    checks = {e.meta["check"]: e for e in view_suite(product_sales).expectations}
    median = checks["range:median_order"]
    assert (median.min_value, median.max_value) == (0, 1_000_000)  # amount's contract
    assert "not_null:median_order" not in checks
    described = {m["name"]: m for m in describe_view(product_sales)["measures"]}
    assert described["p95_order"]["percentile"] == 0.95
    assert described["p95_order"]["speed_layer_rank_error"] == product_sales.quantile_rank_error
    assert described["p95_order"]["exact_in_speed_layer"] is False
    assert described["orders"]["speed_layer_rank_error"] is None


MOMENT_KINDS = {"avg": statistics.fmean, "variance": statistics.variance,
                "stddev": statistics.stdev}
"""The moment kinds, and the exact value of each by Python's ``statistics`` (fractions)."""


UNUSED: Any = None
"""The view and measure a moment kind's partial does not depend on."""


def moments_of(values: list[float | None]) -> bytes:
    return MEASURE_KINDS["avg"].sketch(values, UNUSED, UNUSED)


@pytest.mark.parametrize("kind", sorted(MOMENT_KINDS))
def test_moment_partials_combine_in_any_grouping_to_the_exact_statistic(kind: str) -> None:
    """Associative, commutative, with the empty partial as identity: micro-batches of any
    size, merged in any order and grouping, give the statistic of all values."""
    measure_kind = MEASURE_KINDS[kind]
    generator = random.Random(11)
    values = [generator.choice([None, round(generator.lognormvariate(3, 1.5), 2)])
              for _ in range(3_000)]
    present = [Decimal(str(v)) for v in values if v is not None]
    exact = float(MOMENT_KINDS[kind]([Fraction(v) for v in present]))
    cuts = sorted(generator.sample(range(1, len(values)), 40))
    batches = [values[a:b] for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True)]
    partials = [moments_of(batch) for batch in batches] + [moments_of([]), moments_of([None])]
    for _ in range(5):
        generator.shuffle(partials)
        middle = generator.randrange(1, len(partials))
        grouped = measure_kind.merge([measure_kind.merge(partials[:middle], UNUSED),
                                      measure_kind.merge(partials[middle:], UNUSED)], UNUSED)
        answer = measure_kind.final(grouped, UNUSED, UNUSED)
        assert math.isclose(answer, exact, rel_tol=RELATIVE_ERROR), (kind, answer, exact)


@pytest.mark.parametrize(("values", "expected"), [
    ([], {"avg": None, "variance": None, "stddev": None}),
    ([None, None], {"avg": None, "variance": None, "stddev": None}),
    ([4.5], {"avg": 4.5, "variance": None, "stddev": None}),  # Spark's var_samp of one value
    ([2.0, 2.0, 2.0], {"avg": 2.0, "variance": 0.0, "stddev": 0.0}),
])
def test_moments_of_few_values_are_what_spark_answers(values: list, expected: dict) -> None:
    for kind, answer in expected.items():
        assert MEASURE_KINDS[kind].final(moments_of(values), UNUSED, UNUSED) == answer


def test_a_moment_reconciles_within_the_stated_relative_error_and_not_beyond() -> None:
    average = MEASURE_KINDS["avg"]
    assert average.reconciles(UNUSED, UNUSED, 100.0, 100.0 * (1 + RELATIVE_ERROR / 2), None, 3)
    assert not average.reconciles(UNUSED, UNUSED, 100.0, 100.0 * (1 + 10 * RELATIVE_ERROR),
                                  None, 3)
    assert not average.reconciles(UNUSED, UNUSED, 100.0, None, None, 3)
