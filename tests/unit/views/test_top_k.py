"""``top_k`` on its own: partials combine in any grouping and order (exactly while the
sketch counts every value, within its stated error beyond), the empty partial is the
identity; definitions that give it the wrong parameters or column are refused;
reconciliation passes an exact answer and one within the stated error and fails the
others; the API states the error and answers the lists with JSON's types."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from lambdalake.contracts.registry import ContractRegistry
from lambdalake.quality.suites.view import view_suite
from lambdalake.serving.api import describe_view
from lambdalake.serving.maintenance import judge
from lambdalake.serving.query import json_columns
from lambdalake.views.definition import Measure, ViewDefinition, ViewError, load_views
from lambdalake.views.measures import MEASURE_KINDS
from tests.support.ground_truth import top_k_admits, top_k_truth

HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)
TOP_K = MEASURE_KINDS["top_k"]


class Sketched:
    """What the kind reads of a view and a measure: the sketch's size, its error, and k."""

    name = "top"

    def __init__(self, lg_map_size: int, k: int) -> None:
        self.top_k_lg_map_size, self.k = lg_map_size, k
        self.top_k_error = 3.5 / 2**lg_map_size  # DataSketches' a-priori epsilon


def zipf_values(rng: random.Random, count: int, distinct: int) -> list[str | None]:
    """Values whose frequencies fall off like 1/rank (many ties in the tail); a tenth null."""
    weights = [1 / rank for rank in range(1, distinct + 1)]
    return [None if rng.random() < 0.1 else f"v{rng.choices(range(distinct), weights)[0]:03d}"
            for _ in range(count)]


def groupings(rng: random.Random, values: list[str | None], settings: Sketched
              ) -> list[Any]:
    """Five answers for ``values``: partials of 30 random cuts (and two empty ones),
    shuffled, split in two at random, each half combined, then the halves."""
    cuts = sorted(rng.sample(range(1, len(values)), 30))
    partials = [TOP_K.sketch(values[a:b], settings, settings)
                for a, b in zip([0, *cuts], [*cuts, len(values)], strict=True)]
    partials += [TOP_K.sketch([], settings, settings), TOP_K.sketch([None], settings, settings)]
    answers = []
    for _ in range(5):
        rng.shuffle(partials)
        middle = rng.randrange(1, len(partials))
        halves = [TOP_K.union(partials[:middle], settings, settings),
                  TOP_K.union(partials[middle:], settings, settings)]
        answers.append(TOP_K.final(TOP_K.union(halves, settings, settings), settings, settings))
    return answers


def test_partials_counting_every_value_combine_in_any_grouping_to_the_exact_top_k() -> None:
    """300 distinct values, under the 768 a map of 2^10 counts exactly: associative and
    commutative exactly, ties at the k-th count broken by value."""
    rng = random.Random(11)
    settings = Sketched(10, 20)
    values = zipf_values(rng, 3_000, 300)
    truth = top_k_truth(pd.Series(values, dtype=object), 20)
    assert len({c["count"] for c in truth}) < 20  # some counts tie: the value decides
    for answer in groupings(rng, values, settings):
        assert answer == truth


def test_partials_beyond_the_sketch_combine_in_any_grouping_within_the_stated_error() -> None:
    """500 distinct values into a map of 2^5 counters (24 tracked): estimates, in every
    grouping within 3.5 / 32 of the 18,000 values counted."""
    rng = random.Random(12)
    settings = Sketched(5, 5)
    values = zipf_values(rng, 20_000, 500)
    counts = Counter(v for v in values if v is not None)
    answers = groupings(rng, values, settings)
    assert any(answer != top_k_truth(pd.Series(values, dtype=object), 5) for answer in answers)  # estimated
    for answer in answers:
        assert top_k_admits(counts, answer, 5, settings.top_k_error), answer


@pytest.mark.parametrize("lg_map_size", [5, 10])
def test_the_empty_partial_is_the_identity(lg_map_size: int) -> None:
    rng = random.Random(13)
    settings = Sketched(lg_map_size, 5)
    partial = TOP_K.sketch(zipf_values(rng, 5_000, 400), settings, settings)
    empty = TOP_K.sketch([None], settings, settings)
    alone = TOP_K.final(partial, settings, settings)
    assert TOP_K.final(TOP_K.union([partial, empty], settings, settings), settings,
                       settings) == alone
    assert TOP_K.final(TOP_K.union([empty, partial, None], settings, settings), settings,
                       settings) == alone
    assert TOP_K.final(empty, settings, settings) == []  # as Spark answers a key without one


@pytest.mark.parametrize(("measure", "problem"), [
    ({"name": "m", "kind": "top_k", "column": "product_id"}, "top_k needs a k from 1 to 100"),
    ({"name": "m", "kind": "top_k", "column": "product_id", "k": 0}, "needs a k from 1 to 100"),
    ({"name": "m", "kind": "top_k", "column": "product_id", "k": 101}, "needs a k from 1 to"),
    ({"name": "m", "kind": "top_k", "column": "product_id", "k": 3, "percentile": 0.5},
     "top_k takes no percentile"),
    ({"name": "m", "kind": "top_k", "k": 3}, "top_k needs a column"),
])
def test_a_top_k_with_the_wrong_parameters_is_refused(measure: dict, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Measure.model_validate(measure)


@pytest.fixture(scope="module")
def order_value() -> ViewDefinition:
    return load_views()["order_value"]


@pytest.mark.parametrize(("column", "ddl"), [("amount", "DECIMAL(18,2)"),
                                             ("quantity", "BIGINT"), ("unit_price", "DOUBLE")])
def test_a_top_k_of_a_column_that_is_not_text_is_refused_naming_the_view_and_measure(
    order_value: ViewDefinition, column: str, ddl: str,
) -> None:
    bad = order_value.model_copy(update={"measures": [
        *order_value.measures, Measure(name="m", kind="top_k", column=column, k=3)]})
    with pytest.raises(ViewError, match=rf"view 'order_value': measure 'm': top_k of "
                                        rf"{ddl.replace('(', '[(]').replace(')', '[)]')} "
                                        rf"column '{column}'"):
        bad.check_against(ContractRegistry())


def test_a_top_k_of_a_derived_text_column_is_accepted(order_value: ViewDefinition) -> None:
    view = order_value.model_copy(update={"measures": [
        *order_value.measures, Measure(name="top_bands", kind="top_k", column="band", k=2)]})
    view.check_against(ContractRegistry())


COUNTS = {"p1": 400, "p2": 300, "p3": 200, "p4": 99, "p5": 1}
"""A key's 1,000 values: the default map (2^10) counts them exactly; the stated error is
3.5 / 1024 of 1,000, 3.4 events."""
BATCH = [{"value": "p1", "count": 400}, {"value": "p2", "count": 300},
         {"value": "p3", "count": 200}]


def drift_row(view: ViewDefinition, realtime: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A key both layers hold, equal in every measure but ``top_products``, whose partial is
    the sketch of ``COUNTS``."""
    values = [value for value, count in COUNTS.items() for _ in range(count)]
    partial = TOP_K.sketch(values, view, view.measures[-1])
    same = {f"{prefix}_{m.name}": None for m in view.measures for prefix in "br"}
    return {**same, "b_top_products": BATCH, "r_top_products": realtime,
            "p_top_products": partial, "window_start": HOUR,
            "dimensions": '{"currency":"EUR","band":"small"}'}


def with_counts(*pairs: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"value": value, "count": count} for value, count in pairs]


@pytest.mark.parametrize(("realtime", "agrees"), [
    (BATCH, True),                                                    # exact
    (with_counts(("p1", 403), ("p2", 300), ("p3", 197)), True),       # within 3.4
    (with_counts(("p1", 405), ("p2", 300), ("p3", 200)), False),      # 5 over
    (with_counts(("p1", 400), ("p2", 300), ("p4", 203)), True),       # p4 within 3.4 of the 3rd
    (with_counts(("p1", 400), ("p2", 300), ("p4", 204)), False),      # p4 above batch's 3rd
    (with_counts(("p1", 400), ("p2", 300)), False),                   # p3 lost, counted 200
    (with_counts(("p2", 300), ("p1", 400), ("p3", 200)), True),       # same counts: agree
    (None, False),                                                    # no real-time row
])
def test_reconciliation_holds_top_k_to_the_stated_error(
    order_value: ViewDefinition, realtime: list[dict[str, Any]] | None, agrees: bool,
) -> None:
    drifts = judge(order_value, [drift_row(order_value, realtime)], 0, 4.0, HOUR)
    assert [d["measure"] for d in drifts] == ([] if agrees else ["top_products"])
    if not agrees:
        (drift,) = drifts
        assert drift["severity"] == "critical"
        assert json.loads(drift["batch_text"]) == BATCH
        late = judge(order_value, [drift_row(order_value, realtime)], 3, 4.0, HOUR)
        assert late[0]["severity"] == "warning"  # a dropped event may have been any value


def test_a_wrong_answer_fails_reconciliation_even_when_the_sketch_estimates() -> None:
    """Beyond the sketch (24 counters, 400 distinct values, 20 partials merged): its own
    answer agrees with the exact one, and the same answer with its first count moved past
    the stated error does not."""
    settings = Sketched(5, 3)
    values = zipf_values(random.Random(14), 20_000, 400)
    partial = TOP_K.union([TOP_K.sketch(values[i:i + 1_000], settings, settings)
                           for i in range(0, len(values), 1_000)], settings, settings)
    exact = top_k_truth(pd.Series(values, dtype=object), 3)
    estimated = TOP_K.final(partial, settings, settings)
    assert estimated != exact
    assert TOP_K.reconciles(settings, settings, exact, estimated, partial, 4.0)
    tolerance = settings.top_k_error * sum(v is not None for v in values)
    moved = [{**estimated[0], "count": exact[0]["count"] + int(tolerance) + 1}, *estimated[1:]]
    assert not TOP_K.reconciles(settings, settings, exact, moved, partial, 4.0)


def test_the_api_states_the_count_error_and_answers_lists_of_counts_as_json(
    order_value: ViewDefinition,
) -> None:
    described = {m["name"]: m for m in describe_view(order_value)["measures"]}
    top = described["top_products"]
    assert (top["kind"], top["k"], top["exact_in_speed_layer"]) == ("top_k", 3, False)
    assert top["speed_layer_count_error"] == order_value.top_k_error == 3.5 / 1024
    assert described["orders"]["speed_layer_count_error"] is None
    checks = {e.meta["check"]: e for e in view_suite(order_value).expectations}
    assert "range:top_products" not in checks and "not_null:top_products" not in checks
    counted = pa.struct([("value", pa.string()), ("count", pa.int64())])
    page = pa.table({"top": pa.array([[{"value": "p1", "count": 2}], [], None],
                                     pa.list_(counted))})
    assert json.loads(json.dumps(json_columns(page).to_pylist())) == [
        {"top": [{"value": "p1", "count": 2}]}, {"top": []}, {"top": None}]
