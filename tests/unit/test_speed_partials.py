"""Partial aggregates: a key's rows, combined, are its value (no JVM)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from lambdalake.speed.partials import estimate, merge_partials, sketch_of, with_estimates
from lambdalake.speed.stream import query_name, queries_of
from lambdalake.views.definition import ViewDefinition, load_views

TS = pa.timestamp("us", tz="UTC")
HOUR = datetime(2026, 11, 20, 10, tzinfo=UTC)


@pytest.fixture(scope="module")
def views() -> dict[str, ViewDefinition]:
    return load_views()


def page_rows(view: ViewDefinition, rows: list[tuple[int, str | None, int, range]]) -> pa.Table:
    """Partials of page_traffic: (hour offset, page, views, user ids) per row; sessions =
    users, one batch per row."""
    return pa.table({
        "window_start": pa.array([HOUR + timedelta(hours=h) for h, *_ in rows], TS),
        "window_end": pa.array([HOUR + timedelta(hours=h + 1) for h, *_ in rows], TS),
        "page": pa.array([page for _, page, *_ in rows], pa.string()),
        "views": pa.array([count for _, _, count, _ in rows], pa.int64()),
        "unique_users": pa.array([sketch_of(map(str, ids), view.sketch_lg_k)
                                  for *_, ids in rows], pa.binary()),
        "unique_sessions": pa.array([sketch_of(map(str, ids), view.sketch_lg_k)
                                     for *_, ids in rows], pa.binary()),
        "batch_id": pa.array(range(len(rows)), pa.int64()),
        "updated_at": pa.array([HOUR + timedelta(minutes=i) for i in range(len(rows))], TS),
    })


def test_a_keys_partials_add_up_to_its_value(views: dict[str, ViewDefinition]) -> None:
    view = views["page_traffic"]
    rows = page_rows(view, [
        (0, "/a", 3, range(0, 300)), (0, "/b", 1, range(5, 6)),
        (0, "/a", 4, range(200, 700)),   # overlapping users: counted once
        (1, "/a", 2, range(0, 2)), (0, None, 5, range(0, 5)), (0, None, 1, range(9, 10)),
    ])
    merged = merge_partials(rows, view)
    assert merged.schema == rows.schema, "a merged row is a partial again"
    values = {(r["window_start"], r["page"]): r
              for r in with_estimates(merged, view).to_pylist()}
    first, second = HOUR, HOUR + timedelta(hours=1)
    assert {key: row["views"] for key, row in values.items()} == {
        (first, "/a"): 7, (first, "/b"): 1, (second, "/a"): 2, (first, None): 6}
    exact_users = {(first, "/a"): 700, (first, "/b"): 1, (second, "/a"): 2, (first, None): 6}
    for key, exact in exact_users.items():
        assert abs(values[key]["unique_users"] - exact) <= view.distinct_tolerance(exact, 3)
    assert values[(first, "/a")]["batch_id"] == 2
    assert values[(first, "/a")]["updated_at"] == HOUR + timedelta(minutes=2)
    assert values[(first, "/a")]["window_end"] == second


def test_merging_merged_partials_changes_nothing(views: dict[str, ViewDefinition]) -> None:
    """What the serving step's compaction writes back combines like what it replaced."""
    view = views["page_traffic"]
    rows = page_rows(view, [(0, "/a", 3, range(0, 300)), (0, "/a", 4, range(200, 700)),
                            (0, "/a", 1, range(650, 900))])
    once = merge_partials(rows, view)
    in_two_steps = merge_partials(pa.concat_tables([merge_partials(rows.slice(0, 2), view),
                                                    rows.slice(2)]), view)
    assert with_estimates(in_two_steps, view).to_pylist() == \
        with_estimates(once, view).to_pylist()
    assert merge_partials(once, view).to_pylist() == once.to_pylist()


def test_sums_minima_and_maxima_combine_and_an_empty_sum_stays_null(
    views: dict[str, ViewDefinition],
) -> None:
    view = views["product_sales"]
    rows = pa.table({
        "window_start": pa.array([HOUR] * 3, TS), "window_end": pa.array([HOUR] * 3, TS),
        "product_id": ["p1", "p1", "p2"], "currency": ["EUR", "EUR", "EUR"],
        "orders": pa.array([2, 1, 1], pa.int64()), "units": pa.array([3, 5, None], pa.int64()),
        "revenue": pa.array([10.5, 2.0, None]), "largest_order": pa.array([7.5, 9.0, None]),
        "batch_id": pa.array([0, 1, 1], pa.int64()), "updated_at": pa.array([HOUR] * 3, TS),
    })
    combined = {r["product_id"]: r for r in merge_partials(rows, view).to_pylist()}
    assert (combined["p1"]["orders"], combined["p1"]["units"], combined["p1"]["revenue"],
            combined["p1"]["largest_order"]) == (3, 8, 12.5, 9.0)
    assert combined["p2"]["units"] is None and combined["p2"]["largest_order"] is None


def test_a_sketch_estimates_its_distinct_values() -> None:
    assert estimate(sketch_of(range(0), 12)) == 0
    assert estimate(sketch_of([1, 1, 2], 12)) == 2
    assert estimate(None) is None


def test_views_that_share_a_lateness_allowance_share_a_query(
    views: dict[str, ViewDefinition],
) -> None:
    later = views["funnel"].model_copy(update={"lateness": "1 hour"})
    queries = queries_of([views["page_traffic"], views["product_sales"], later])
    assert queries == {query_name(views["page_traffic"]): [views["page_traffic"],
                                                           views["product_sales"]],
                       query_name(later): [later]}
    assert query_name(later) == "speed_late_3600s"
