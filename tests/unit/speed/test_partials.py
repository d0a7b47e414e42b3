"""Partial aggregates: a key's rows, combined, are its value (no JVM)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from lambdalake.generator.traffic import TrafficGenerator, TrafficProfile
from lambdalake.speed.partials import merge_partials, partials_of, with_estimates
from lambdalake.speed.stream import queries_of, query_name
from lambdalake.views.definition import ViewDefinition, load_views
from lambdalake.views.measures import estimate, sketch_of
from tests.support.ground_truth import expected_view, percentile_disc, rank_admits, same_value
from tests.support.hopping import HOPPING, hopping_truth

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
        "median_order": pa.array([None] * 3, pa.binary()),
        "p95_order": pa.array([None] * 3, pa.binary()),
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


def generated_events(count: int) -> list[dict[str, Any]]:
    """Distinct valid events over two hours and their boundaries, late ones included."""
    profile = TrafficProfile(count=count, seed=11, start_time=HOUR - timedelta(minutes=20),
                             event_time_rate=count / 7200, late_fraction=0.1, users=300,
                             pages=6, products=10, malformed_fraction=0, duplicate_fraction=0)
    events = [r.event for r in TrafficGenerator(profile).records()]
    for event in events:
        event["occurred_at"] = datetime.fromisoformat(event["occurred_at"].replace("Z", "+00:00"))
    return events


def with_kafka_coordinates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` as records of a topic of three partitions, all with one Kafka timestamp
    (so events at one instant are ordered by partition and offset)."""
    return [{**event, "kafka_timestamp": HOUR, "topic": "events", "partition": i % 3,
             "offset": i // 3} for i, event in enumerate(events)]


def as_batch(events: list[dict[str, Any]]) -> pa.Table:
    """Events as the speed layer collects a micro-batch: the classified column types, and
    the records' Kafka coordinates when the events have them."""
    columns = {"event_id": pa.string(), "event_type": pa.string(), "occurred_at": TS,
               "user_id": pa.string(), "session_id": pa.string(), "country": pa.string(),
               "page": pa.string(), "product_id": pa.string(), "quantity": pa.int64(),
               "amount": pa.decimal128(18, 2), "currency": pa.string()}
    if events and "offset" in events[0]:
        columns |= {"kafka_timestamp": TS, "topic": pa.string(), "partition": pa.int32(),
                    "offset": pa.int64()}
    return pa.table({name: pa.array([e.get(name) for e in events], kind)
                     for name, kind in columns.items()})


EXACT = {"count": len, "sum": lambda values: sum(values) if values else None,
         "min": lambda values: min(values, default=None),
         "max": lambda values: max(values, default=None),
         "distinct_count": lambda values: len(set(values))}


def exact_values(events: list[dict[str, Any]], view: ViewDefinition) -> dict[tuple, dict]:
    """The view over ``events``, computed in plain Python: the independent answer."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event["event_type"] in view.event_types:
            moment = event[view.event_time]
            start = moment - timedelta(seconds=moment.timestamp() % view.grain_seconds)
            groups[(start, *(event.get(d) for d in view.dimensions))].append(event)
    values = {}
    for key, members in groups.items():
        row = {}
        for m in view.measures:
            counted = [e for e in members if e["event_type"] in (m.event_types or view.event_types)]
            present = [v for v in (e.get(m.column, 1) if m.column else 1 for e in counted)
                       if v is not None]
            if m.kind == "approx_percentile":
                row[m.name], row[f"{m.name}__values"] = percentile_disc(present, m.percentile), present
            else:
                row[m.name] = EXACT[m.kind](present)
        values[key] = row
    return values


@pytest.mark.parametrize("view_name", ["page_traffic", "product_sales", "funnel"])
def test_partials_of_micro_batches_combine_to_the_views_exact_values(
    views: dict[str, ViewDefinition], view_name: str,
) -> None:
    view = views[view_name]
    events = generated_events(6000)
    batches = [as_batch(events[i:i + 1500]) for i in range(0, len(events), 1500)]
    partials = pa.concat_tables(partials_of(batch, view) for batch in batches)
    merged = with_estimates(merge_partials(partials, view), view)
    actual = {tuple(row[k] for k in view.key): row for row in merged.to_pylist()}
    expected = exact_values(events, view)
    assert actual.keys() == expected.keys()
    assert len(expected) > 2 * len({key[0] for key in expected}), "several keys per window"
    for key, want in expected.items():
        got = actual[key]
        assert got["window_end"] == key[0] + timedelta(seconds=view.grain_seconds)
        for measure in view.measures:
            if measure.exact_in_speed_layer:
                assert got[measure.name] == want[measure.name], (key, measure.name)
            elif measure.kind == "approx_percentile":
                assert rank_admits(want[f"{measure.name}__values"], got[measure.name],
                                   measure.percentile, view.quantile_rank_error), (key, measure.name)
            else:
                tolerance = view.distinct_tolerance(want[measure.name], 3)
                assert abs(got[measure.name] - want[measure.name]) <= tolerance, (key, measure.name)


ARROW_COMBINED = ViewDefinition.model_validate({
    "name": "arrow_combined", "description": "every kind Arrow or a sketch union combines",
    "event_types": ["purchase"], "grain": "1 hour", "lateness": "10 minutes",
    "dimensions": ["currency"],
    "measures": [{"name": "orders", "kind": "count"},
                 {"name": "revenue", "kind": "sum", "column": "amount"},
                 {"name": "smallest", "kind": "min", "column": "amount"},
                 {"name": "largest", "kind": "max", "column": "amount"},
                 {"name": "buyers", "kind": "distinct_count", "column": "user_id"},
                 {"name": "median", "kind": "approx_percentile", "column": "amount",
                  "percentile": 0.5}]})


def test_count_sum_min_max_and_sketches_combine_in_any_grouping_and_order() -> None:
    """Associative, commutative, with the empty partial as identity: micro-batches of any
    size, their partial rows shuffled, merged in two groups and then together with an
    empty micro-batch's, give the exact values (the sketches': within their stated error)
    every time."""
    import random

    view = ARROW_COMBINED
    events = generated_events(3000)
    expected = exact_values(events, view)
    generator = random.Random(5)
    cuts = sorted(generator.sample(range(1, len(events)), 30))
    partials = pa.concat_tables([partials_of(as_batch(events[a:b]), view) for a, b
                                 in zip([0, *cuts], [*cuts, len(events)], strict=True)])
    empty = partials_of(as_batch(events[:0]), view)
    assert empty.num_rows == 0 and empty.schema == partials.schema
    for _ in range(4):
        order = list(range(partials.num_rows))
        generator.shuffle(order)
        shuffled = partials.take(pa.array(order))
        middle = generator.randrange(1, shuffled.num_rows)
        grouped = merge_partials(pa.concat_tables([
            merge_partials(shuffled.slice(middle), view), empty,
            merge_partials(shuffled.slice(0, middle), view)]), view)
        actual = {tuple(row[k] for k in view.key): row
                  for row in with_estimates(grouped, view).to_pylist()}
        assert actual.keys() == expected.keys()
        for key, want in expected.items():
            got = actual[key]
            assert {name: got[name] for name in ("orders", "revenue", "smallest", "largest")
                    } == {name: want[name] for name in ("orders", "revenue", "smallest",
                                                        "largest")}, key
            assert abs(got["buyers"] - want["buyers"]) <= view.distinct_tolerance(
                want["buyers"], 3), key
            assert rank_admits(want["median__values"], got["median"], 0.5,
                               view.quantile_rank_error), key


def test_partials_of_a_view_with_expressions_combine_to_the_truth(
    views: dict[str, ViewDefinition],
) -> None:
    """order_value: a filter, a derived dimension, a derived measure input, a measure
    filter, averages and a spread, first and last values, against the definition's SQL
    run by DuckDB."""
    view = views["order_value"]
    events = with_kafka_coordinates(generated_events(6000))
    partials = pa.concat_tables(partials_of(as_batch(events[i:i + 1000]), view)
                                for i in range(0, len(events), 1000))
    merged = with_estimates(merge_partials(partials, view), view)
    actual = {(row["window_start"], *(row[d] for d in view.dimensions)): row
              for row in merged.to_pylist()}
    frame = pd.DataFrame(events).assign(
        occurred_at=lambda f: pd.to_datetime(f["occurred_at"], utc=True).dt.tz_localize(None))
    truth = expected_view(frame, view, HOUR - timedelta(hours=1), HOUR + timedelta(hours=3))
    expected = {(row["window_start"].to_pydatetime().replace(tzinfo=UTC),
                 *(row[d] for d in view.dimensions)): row for row in truth.to_dict("records")}
    assert actual.keys() == expected.keys()
    assert {key[2] for key in expected} == {"small", "medium", "large"}
    purchases = frame[frame["event_type"] == "purchase"]
    assert 0 < len(purchases) - sum(row["orders"] for row in expected.values()) == (
        purchases["amount"] < 10).sum()  # the view's filter left these out
    for key, want in expected.items():
        for measure in view.measures:
            assert same_value(measure.kind, want[measure.name], actual[key][measure.name]), (
                key, measure.name, want[measure.name], actual[key][measure.name])


def test_partials_have_the_real_time_tables_schema(views: dict[str, ViewDefinition]) -> None:
    """The types Spark gave the tables before: counts and sketches never null, and a sum
    of DECIMAL(18,2) with ten more digits, so existing tables take the rows."""
    partials = partials_of(as_batch(generated_events(500)), views["product_sales"])
    assert partials.schema.field("orders") == pa.field("orders", pa.int64(), nullable=False)
    assert partials.schema.field("revenue").type == pa.decimal128(28, 2)
    assert partials.schema.field("largest_order").type == pa.decimal128(18, 2)
    assert partials.schema.field("window_start").type == TS
    funnel = partials_of(as_batch(generated_events(500)), views["funnel"])
    assert funnel.schema.field("sessions_with_cart").nullable is False
    assert all(isinstance(s, bytes) for s in funnel.column("sessions_with_cart").to_pylist())


def test_hopping_partials_combine_to_every_window_an_event_is_in() -> None:
    """An hour every 15 minutes: the micro-batches' partials, merged, are each window's
    purchases as plain Python finds them in it (``tests.support.hopping``), including
    the windows that start before the first event and end after the last."""
    view = ViewDefinition.model_validate(HOPPING)
    events = generated_events(4000)
    partials = pa.concat_tables(partials_of(as_batch(events[i:i + 700]), view)
                                for i in range(0, len(events), 700))
    assert set(partials.column("window_end").to_pylist()) == {
        start + timedelta(hours=1) for start in partials.column("window_start").to_pylist()}
    merged = with_estimates(merge_partials(partials, view), view)
    actual = {(row["window_start"], row["currency"]): row for row in merged.to_pylist()}
    first = min(e["occurred_at"] for e in events).replace(minute=0, second=0, microsecond=0)
    truth = hopping_truth(events, first - timedelta(hours=1), first + timedelta(hours=4))
    assert actual.keys() == truth.keys()
    assert len({start for start, _ in truth}) > 8, "windows a slide apart"
    kinds = {m.name: m.kind for m in view.measures}
    for key, want in truth.items():
        for name, value in want.items():
            assert same_value(kinds[name], value, actual[key][name]), (key, name)
