"""Reconcile, collapse and retire on small Delta tables written with delta-rs (no JVM)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lambdalake.quality.history import read_results
from lambdalake.serving.maintenance import (
    RECONCILIATION_TABLE,
    gate_result,
    judge,
    maintain,
    maintain_views,
)
from lambdalake.settings import Settings
from lambdalake.speed.realtime import realtime_table
from lambdalake.streaming.progress import write_status
from lambdalake.views.definition import load_views
from tests.support.serving_tables import append_realtime, hour, publish_hours, write_batch
from tests.support.settings_factory import MakeSettings


@pytest.fixture
def lake(make_settings: MakeSettings) -> Settings:
    return make_settings(batch={"start_date": date(2026, 11, 20)},
                         serving={"retire_margin_seconds": 3600})


def speed_status(lake: Settings, watermark: datetime, dropped: int = 0, lag: int = 0,
                 newest_batch: datetime | None = None) -> None:
    write_status(lake, "speed", {"views": {"page_traffic": {
        "watermark": watermark.isoformat().replace("+00:00", "Z"),
        "dropped_by_watermark_total": dropped, "lag": lag,
        "batch_timestamp": (newest_batch or watermark).isoformat().replace("+00:00", "Z")}}})


def realtime_rows(lake: Settings) -> list[tuple[int, str, int]]:
    table = pa.table(DeltaTable(lake.table_path(realtime_table("page_traffic"))).to_pyarrow_table())
    return sorted((r["window_start"].hour, r["page"], r["views"]) for r in table.to_pylist())


def test_matching_layers_pass_and_closed_windows_collapse_and_old_ones_retire(
    lake: Settings,
) -> None:
    view = load_views()["page_traffic"]
    write_batch(lake, [(0, "/a", 10), (1, "/a", 11), (2, "/a", 12)])
    publish_hours(lake, 0, 1, 2)  # mark: 03:00
    append_realtime(lake, 0, [(h, "/a", 1) for h in range(5)])
    append_realtime(lake, 1, [(0, "/a", 9), (1, "/a", 10), (2, "/a", 11), (3, "/a", 5),
                              (4, "/a", 2)])
    speed_status(lake, hour(4))  # windows before 04:00 are closed
    report = maintain(lake, view)
    assert report.gate.success, report.gate.report()
    assert (report.windows_compared, report.windows_collapsed) == (3, 4)
    assert report.rows_retired == 2  # 00:00 and 01:00 ended an hour or more before the mark
    # collapsed: one row per key in closed windows (its partials added up); the open
    # window keeps its partials
    assert realtime_rows(lake) == [(2, "/a", 12), (3, "/a", 6), (4, "/a", 1), (4, "/a", 2)]
    assert not DeltaTable.is_deltatable(lake.table_path(RECONCILIATION_TABLE))
    [recorded] = read_results(lake)
    assert (recorded["layer"], recorded["subject"], recorded["success"]) == (
        "serving", "page_traffic", True)
    assert maintain(lake, view).rows_retired == 0  # idempotent



def test_one_view_s_error_does_not_keep_the_others_from_being_maintained(
    lake: Settings,
) -> None:
    """The serving DAG maintains every view in one task: a view whose real-time table cannot
    be read fails it, but only after the views behind it were maintained and recorded."""
    views = load_views()
    broken, view = views["product_sales"], views["page_traffic"]
    log = Path(lake.table_path(realtime_table(broken.name))) / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020}.json").write_text("not a commit\n")
    write_batch(lake, [(0, "/a", 10)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(0, "/a", 4)])
    append_realtime(lake, 1, [(0, "/a", 6)])
    speed_status(lake, hour(1))
    with pytest.raises(ExceptionGroup, match="view\\(s\\) product_sales$") as raised:
        maintain_views(lake, [broken, view])
    assert [error.__notes__ for error in raised.value.exceptions] == [
        ["while maintaining view product_sales"]]
    assert realtime_rows(lake) == [(0, "/a", 10)]  # page_traffic's closed window collapsed
    assert [(r["subject"], r["success"]) for r in read_results(lake)] == [("page_traffic", True)]
    assert [r.view for r in maintain_views(lake, [view, view])] == ["page_traffic"] * 2

def test_a_double_count_fails_and_a_shortfall_is_explained_only_by_late_drops(
    lake: Settings,
) -> None:
    view = load_views()["page_traffic"]
    write_batch(lake, [(0, "/a", 10), (0, "/b", 10)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(0, "/a", 12), (0, "/b", 9)])
    speed_status(lake, hour(2), dropped=0)
    report = maintain(lake, view, now=hour(2))
    assert not report.gate.success
    assert [(o.check, o.unexpected_count) for o in report.gate.critical_failures] == [
        ("drift:views", 2)]
    speed_status(lake, hour(2), dropped=3)  # the speed layer dropped late events: /b is short
    report = maintain(lake, view, now=hour(2) + timedelta(minutes=1))
    assert [(o.check, o.unexpected_count) for o in report.gate.critical_failures] == [
        ("drift:views", 1)]
    assert [(o.check, o.unexpected_count) for o in report.gate.warnings] == [("drift:views", 1)]
    drifts = pa.table(DeltaTable(lake.table_path(RECONCILIATION_TABLE)).to_pyarrow_table())
    last = max(r["checked_at"] for r in drifts.to_pylist())
    assert sorted((r["dimensions"], r["absolute_drift"], r["severity"])
                  for r in drifts.to_pylist() if r["checked_at"] == last) == [
        ('{"page":"/a"}', 2.0, "critical"), ('{"page":"/b"}', -1.0, "warning")]


def test_an_explained_drift_says_how_many_changed_keys_explain_it() -> None:
    """Books lost two orders to toys, which gained two: two products changed category since
    the window began, p1 held books, p2 books and then toys, p3 toys. The warning names
    the three keys its explanation covers, each sample row its own."""
    view = load_views()["product_sales_by_category"]
    moved = [category_row("books", 5, 3), category_row("toys", 2, 4)]
    changed = {("books",): {"p1", "p2"}, ("toys",): {"p2", "p3"}}
    drifts = judge(view, moved, 0, 4.0, hour(3), lambda _join, _moment: changed)
    assert {(json.loads(d["dimensions"])["category"], tuple(d["explained_by"]["product"]))
            for d in drifts if d["measure"] == "orders"} == {
        ("books", ("p1", "p2")), ("toys", ("p2", "p3"))}
    gate = gate_result(view, moved, drifts, 0, hour(0), hour(1), 0.0, [])
    assert gate.success
    orders = next(o for o in gate.warnings if o.check == "drift:orders:explained")
    assert (orders.unexpected_count, orders.explained_by) == (2, {"product": 3})
    assert sorted(s["changed_keys"] for s in orders.samples) == ["product: p1, p2",
                                                                 "product: p2, p3"]
    assert "2 unexpected, explained by 3 changed product keys" in orders.describe()
    [recorded] = [o for o in gate.to_json()["warnings"] if o["check"] == "drift:orders:explained"]
    assert recorded["explained_by"] == {"product": 3}


def test_a_layer_behind_its_promise_is_a_freshness_warning(lake: Settings) -> None:
    view = load_views()["page_traffic"]
    write_batch(lake, [(0, "/a", 10)])
    publish_hours(lake, 0)  # mark: 01:00
    speed_status(lake, hour(1), lag=40, newest_batch=hour(1))
    assert maintain(lake, view, now=hour(1) + timedelta(minutes=1)).gate.warnings == []
    late = maintain(lake, view, now=hour(3))
    assert late.gate.success and late.gate.evaluated == len(view.measures) + 2
    assert [(o.check, o.observed) for o in late.gate.warnings] == [
        ("freshness:batch", 7200), ("freshness:realtime", 7200)]
    speed_status(lake, hour(1), lag=0, newest_batch=hour(1))  # idle, not stale
    assert [o.check for o in maintain(lake, view, now=hour(3)).gate.warnings] == [
        "freshness:batch"]
    assert read_results(lake)[-1]["warnings"][0]["check"] == "freshness:batch"


def test_a_sketch_may_miss_a_small_count_by_one_collision_but_not_by_two() -> None:
    view = load_views()["page_traffic"]  # unique_* are sketches in the speed layer, rsd 0.02
    row = {"window_start": hour(0), "dimensions": '{"page":"/a"}', "b_views": 7, "r_views": 7,
           "b_unique_users": 7, "r_unique_users": 6, "b_unique_sessions": 7,
           "r_unique_sessions": 5}
    drifts = judge(view, [row], late_rows_dropped=0, tolerance_rsd=4.0, checked_at=hour(3))
    assert [(d["measure"], d["absolute_drift"]) for d in drifts] == [("unique_sessions", -2.0)]
    large = {**row, "b_unique_users": 1000, "r_unique_users": 1080, "r_unique_sessions": 7}
    assert judge(view, [large], 0, 4.0, hour(3)) == []  # 8 % of 1,000: within 4 rsd
    larger = {**large, "r_unique_users": 1081}
    assert [d["measure"] for d in judge(view, [larger], 0, 4.0, hour(3))] == ["unique_users"]


def test_open_windows_are_neither_compared_nor_rewritten(lake: Settings) -> None:
    view = load_views()["page_traffic"]
    write_batch(lake, [(0, "/a", 10)])
    publish_hours(lake, 0)
    append_realtime(lake, 0, [(0, "/a", 4)])
    append_realtime(lake, 1, [(0, "/a", 7)])
    speed_status(lake, hour(0) + timedelta(minutes=50))  # 00:00-01:00 still open
    report = maintain(lake, view)
    assert report.gate.success and report.windows_compared == 0
    assert realtime_rows(lake) == [(0, "/a", 4), (0, "/a", 7)]


def category_row(category: str, batch: int, realtime: int) -> dict[str, object]:
    return {"window_start": hour(0), "dimensions": f'{{"category":"{category}","currency":"EUR"}}',
            "b_orders": batch, "r_orders": realtime, "b_units": batch, "r_units": realtime,
            "b_revenue": float(batch), "r_revenue": float(realtime)}


def test_a_join_s_moved_events_are_explained_by_reference_changes_lost_ones_are_not() -> None:
    view = load_views()["product_sales_by_category"]
    moved = [category_row("books", 5, 3), category_row("toys", 2, 4),
             category_row("garden", 1, 1)]
    asked: list[datetime] = []

    def changed(_join: object, moment: datetime) -> dict[tuple[str, ...], set[str]]:
        asked.append(moment)
        return {("books",): {"p1", "p2"}, ("toys",): {"p2", "p3"}}

    drifts = judge(view, moved, 0, 4.0, hour(3), changed)
    assert {(json.loads(d["dimensions"])["category"], d["severity"]) for d in drifts} == {
        ("books", "explained"), ("toys", "explained")}
    assert asked == [hour(0)]  # once per window and join
    # a member no change touched is a real failure
    assert {d["severity"] for d in judge(view, moved, 0, 4.0, hour(3),
                                         lambda _j, _m: {("books",): {"p1"}})} == {
        "explained", "critical"}
    # members touched, but an order lost over the window: not a move
    lost = [category_row("books", 5, 3), category_row("toys", 2, 3)]
    assert {d["severity"] for d in judge(view, lost, 0, 4.0, hour(3), changed)} == {"critical"}
    # ... unless the speed layer dropped late events: moves and a shortfall
    assert {d["severity"] for d in judge(view, lost, 5, 4.0, hour(3), changed)} == {
        "explained"}
    # counted twice is never explained
    doubled = [category_row("books", 5, 5), category_row("toys", 2, 3)]
    assert {d["severity"] for d in judge(view, doubled, 5, 4.0, hour(3), changed)} == {
        "critical"}
    # without reference data to ask, every difference is a failure
    assert {d["severity"] for d in judge(view, moved, 0, 4.0, hour(3))} == {"critical"}
